"""Read the locals of chosen functions at the moment they return, while running them normally.

The lesson needs values that the vendored code computes but does not return (the mean of squares
inside ``RMSNorm.rms_forward``, the gate/up halves inside ``SiluAndMul.forward``). A trace function
limited to those code objects copies their locals on ``return``; nothing else is traced.
"""
from __future__ import annotations

import contextlib
import sys
from types import FrameType
from typing import Any, Callable, Iterator

from annotate.trace.model.internals import innermost_callable


def _copy(value: Any) -> Any:
    """Tensors are cloned (later in-place ops must not change what was seen); the rest is kept."""
    clone = getattr(value, "clone", None)
    return clone().detach() if callable(clone) else value


@contextlib.contextmanager
def locals_at_return(*functions: Callable[..., Any]) -> Iterator[dict[str, dict[str, Any]]]:
    """Yield a dict filled, per function ``__qualname__``, with its locals at its last return."""
    codes = {innermost_callable(f).__code__: innermost_callable(f).__qualname__ for f in functions}
    seen: dict[str, dict[str, Any]] = {}

    def local(frame: FrameType, event: str, arg: Any) -> Any:
        if event == "return":
            seen[codes[frame.f_code]] = {k: _copy(v) for k, v in frame.f_locals.items() if k != "self"}
        return local

    def scope(frame: FrameType, event: str, arg: Any) -> Any:
        return local if frame.f_code in codes else None

    previous = sys.gettrace()
    sys.settrace(scope)
    try:
        yield seen
    finally:
        sys.settrace(previous)
