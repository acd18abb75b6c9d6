"""annotate.vendoring.pin: the committed locks of the wheel-pinned upstreams (HF transformers, vLLM)
are exactly what `lock_from_wheel` computes from the pinned wheels, so their facts can be rebuilt and
checked by anyone holding the wheel (`annotate vendor sync` caches it under .cache/wheels/)."""
from __future__ import annotations

from pathlib import Path

import pytest

from annotate.vendoring.lock import read_lock, upstream_lock
from annotate.vendoring.pin import lock_from_wheel
from annotate.vendoring.sync import WHEEL_CACHE_DIR

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name", ["transformers", "vllm"])
def test_a_wheel_lock_is_what_the_wheel_gives(name: str) -> None:
    committed = read_lock(REPO / upstream_lock(name))
    source, up = committed.source, committed.upstream
    wheels = sorted((REPO / WHEEL_CACHE_DIR).glob(f"{source.name}-{source.version}-*.whl"))
    if not wheels:
        pytest.skip(f"{source.name} {source.version}'s wheel is not cached (run `annotate vendor sync`)")
    rebuilt = lock_from_wheel(wheels[0], source.name, source.version, list(source.include), up.repo, up.tag,
                              up.repo_path, up.built_from)
    assert rebuilt.source == source          # wheel sha256, include list, each file's sha256
    assert rebuilt.upstream.files == up.files   # blob ids and line hashes at the tag
    assert rebuilt == committed


def test_a_member_the_wheel_lacks_is_named(tmp_path: Path) -> None:
    committed = read_lock(REPO / upstream_lock("transformers"))
    source = committed.source
    wheels = sorted((REPO / WHEEL_CACHE_DIR).glob(f"{source.name}-{source.version}-*.whl"))
    if not wheels:
        pytest.skip("the transformers wheel is not cached (run `annotate vendor sync`)")
    with pytest.raises(ValueError, match="has no transformers/nope.py"):
        lock_from_wheel(wheels[0], source.name, source.version, ["transformers/nope.py"], "https://example.org/r", "v0")
