"""Object identity as a dict key, without the audit event that `id()` raises.

Python raises an audit event for every `id()` call, and for every read of `frame.f_code` and of
`function.__code__`. That costs nothing until a process installs an audit hook. From Python 3.12 on,
filelock (which torch and the Hugging Face libraries import) installs one. From then on, each of
those calls also runs that hook, a Python function: about 0.5 µs instead of 0.05 µs on this machine.
The recorder looks objects up by identity hundreds of times per forward (copies by tensor, frames by
code object, modules by instance). So it keys them by :func:`key`, and reads code objects through
audited attributes only where nothing else will do. The memory a tensor lives in has its key here too
(:func:`storage_key`): the copies and aliasing tables look it up as often.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    import torch

#: `key(obj)`: an int that no other live object shares, as `id(obj)` is. CPython's default hash is
#: the object's address rotated by four bits, a one-to-one map, and it raises no audit event. It is
#: taken from `object` itself, so a class that defines its own `__hash__` (torch.Tensor's calls
#: `id`) is keyed the same way. Like `id`, a key may be reused once its object is gone: a table
#: keyed by it also holds the object.
key: Callable[[Any], int] = object.__hash__


def storage_key(t: torch.Tensor) -> tuple[torch.device, int]:
    """Identity of the memory a tensor lives in (start of its storage): equal keys mean the tensors alias.

    Computed from the view's pointer and offset rather than `untyped_storage()`, which builds a
    Python object per call. It runs for every tensor the recorder copies and for every local of every
    record after it, so it lives here, in a module the recorder's compiled build includes."""
    return (t.device, int(t.data_ptr() - t.storage_offset() * t.element_size()))
