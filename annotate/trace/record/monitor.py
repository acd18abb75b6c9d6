"""Line events from `sys.monitoring` (PEP 669, Python ≥ 3.12), for the watched code objects only.

`sys.settrace` calls a Python function for every call the traced program makes, watched or not:
on the tiny shape that alone is ~1.2× a plain forward before a single line is recorded.
`sys.monitoring` instead instruments the chosen code objects (`set_local_events`), so code the
recorder does not watch (nn.Module's call machinery, Dynamo's and Inductor's wrappers, torch's
Python helpers) runs as if nothing were listening.

The events are turned into the same four calls the recorder's `sys.settrace` path makes, so both
paths produce the same records (tests/test_monitor.py runs both on one interpreter):

* ``start(frame, code_key)``: a watched frame began (PY_START; `code_key` is its code's
  `identity.key`); returns the recorder's per-frame state, or None for a frame it does not record
  (a compiled body that fell back to eager).
* ``line(state, frame, lineno)``: a line of that frame starts (LINE).
* ``ret(state, frame, value)``: it returns (PY_RETURN), or is unwound by an exception (PY_UNWIND,
  value None).
* ``exception()``: an exception was raised in, or reached, a recorded frame (RAISE, PY_UNWIND,
  EXCEPTION_HANDLED: the events `sys.settrace` reports as ``"exception"``).

Watched frames nest strictly (none of the watched functions is a generator), so the frame a LINE
event belongs to is the innermost watched frame: a stack of (state, frame, code) stands in for
`sys.settrace`'s per-frame trace functions.
"""
from __future__ import annotations

import inspect
import sys
from dataclasses import dataclass
from types import CodeType, FrameType, TracebackType
from typing import Any, Callable, Iterable

from annotate.trace.record.identity import key as key_of

#: how far up `sys._getframe` finds the Python code that called into this module: its functions run in
#: frames of their own when it runs as Python source, and in none when it is the mypyc build (`native.py`)
CALLER_DEPTH = 1 if __file__.endswith(".py") else 0

#: tool ids tried in turn (0 is the debugger's, 1 coverage's, 2 a profiler's: taken last)
_TOOL_IDS = (3, 4, 2, 0)
_TOOL_NAME = "annotate-recorder"


def _monitoring() -> Any:
    """`sys.monitoring` (typed loosely: the type checker may be set to Python 3.11, which lacks it)."""
    return sys.monitoring  # type: ignore[attr-defined,unused-ignore]


@dataclass(frozen=True)
class Handlers:
    """What the recorder does on each event (see the module docstring)."""

    start: Callable[[FrameType, int], Any]
    line: Callable[[Any, FrameType, int], None]
    ret: Callable[[Any, FrameType, Any], None]
    exception: Callable[[], None]


class LineMonitor:
    """`with LineMonitor(codes, handlers): …` delivers the events of `codes` to `handlers`."""

    def __init__(self, codes: Iterable[CodeType], handlers: Handlers) -> None:
        self.codes = list(codes)
        for code in self.codes:
            if code.co_flags & (inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR):
                raise ValueError(f"line events: {code.co_qualname} suspends and resumes; "
                                 "the monitor only follows plain functions")
        self.handlers = handlers
        self.tool: int | None = None
        self._stack: list[tuple[Any, FrameType, CodeType]] = []   # (state, frame, its code)
        self._events: list[int] = []   # the events with a callback registered (by `__enter__`)

    def __enter__(self) -> LineMonitor:
        mon = _monitoring()
        tool = next((t for t in _TOOL_IDS if mon.get_tool(t) is None), None)
        if tool is None:
            raise RuntimeError("line events: every sys.monitoring tool id the recorder may use is taken")
        mon.use_tool_id(tool, _TOOL_NAME)
        self.tool = tool
        self._stack.clear()
        ev = mon.events
        callbacks = self._callbacks()
        self._events = list(callbacks)
        for event, callback in callbacks.items():
            mon.register_callback(tool, event, callback)
        for code in self.codes:
            mon.set_local_events(tool, code, ev.PY_START | ev.LINE | ev.PY_RETURN)
        # exceptions can only be watched globally; their callbacks return at once for other code
        mon.set_events(tool, ev.RAISE | ev.PY_UNWIND | ev.EXCEPTION_HANDLED)
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        mon, tool = _monitoring(), self.tool
        if tool is None:
            return
        mon.set_events(tool, 0)
        for code in self.codes:
            mon.set_local_events(tool, code, 0)
        for event in self._events:
            mon.register_callback(tool, event, None)
        mon.free_tool_id(tool)
        self.tool = None
        self._stack.clear()

    def _callbacks(self) -> dict[int, Callable[..., Any]]:
        """The event callbacks: closures over bound methods and the stack (they run per line)."""
        ev = _monitoring().events
        h, stack = self.handlers, self._stack
        start, line, ret, exception = h.start, h.line, h.ret, h.exception
        watched = frozenset(key_of(c) for c in self.codes)
        getframe, depth = sys._getframe, CALLER_DEPTH

        def on_start(code: CodeType, offset: int) -> None:
            frame = getframe(depth)   # the frame that started (this callback's caller)
            stack.append((start(frame, key_of(code)), frame, code))

        def on_line(code: CodeType, lineno: int) -> None:
            state, frame, started = stack[-1]
            # cheap (the code kept at PY_START, not `frame.f_code`: an audited read), and records
            # would silently go wrong without it
            if started is not code:
                raise RuntimeError(f"line events: a line of {code.co_qualname} arrived while "
                                   f"{started.co_qualname} was the innermost watched frame")
            if state is not None:
                line(state, frame, lineno)

        def on_return(code: CodeType, offset: int, value: Any) -> None:
            state, frame, _ = stack.pop()
            if state is not None:
                ret(state, frame, value)

        def on_raise(code: CodeType, offset: int, exc: BaseException) -> None:
            if key_of(code) in watched and stack and stack[-1][0] is not None:
                exception()

        def on_unwind(code: CodeType, offset: int, exc: BaseException) -> None:
            if key_of(code) in watched and stack:
                state, frame, _ = stack.pop()
                if state is not None:
                    exception()
                    ret(state, frame, None)

        return {ev.PY_START: on_start, ev.LINE: on_line, ev.PY_RETURN: on_return,
                ev.RAISE: on_raise, ev.PY_UNWIND: on_unwind, ev.EXCEPTION_HANDLED: on_raise}
