"""identity.key: unique among live objects, like id(), and no audit event, unlike id()."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import torch

from annotate.trace.record.identity import key


def test_keys_are_unique_among_live_objects_and_stable() -> None:
    objects = [torch.zeros(1) for _ in range(500)] + [object() for _ in range(500)]
    keys = [key(o) for o in objects]
    assert len(set(keys)) == len(objects)
    assert keys == [key(o) for o in objects]


def test_a_class_with_its_own_hash_is_keyed_by_identity() -> None:
    class Same:
        def __hash__(self) -> int:
            return 7

        def __eq__(self, other: object) -> bool:
            return True

    a, b = Same(), Same()
    assert hash(a) == hash(b) and key(a) != key(b)
    t = torch.ones(2)
    assert key(t) == key(t) and key(t) != key(t.view(2))   # a view is another tensor object


def test_it_raises_no_audit_event_where_id_does() -> None:
    # audit hooks cannot be removed, so this runs in a child interpreter
    code = textwrap.dedent("""
        import sys
        from annotate.trace.record.identity import key
        seen = []
        sys.addaudithook(lambda event, args: seen.append(event))
        o = object()
        key(o)
        before = list(seen)
        id(o)
        print(before.count("builtins.id"), seen.count("builtins.id"))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["0", "1"]
