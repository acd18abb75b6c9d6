"""The events `annotate.trace.record.monitor.LineMonitor` delivers, next to those `sys.settrace` gives for
the same code, as JSON on stdout. Run by tests/test_monitor.py under a Python 3.12 interpreter
(`python tests/monitor_check.py`); the test compares the two lists.

The programs cover what the recorder meets or must survive: nested watched calls through an
unwatched one, a watched frame the recorder declines to record (its state is None), an exception
raised and caught inside a watched frame, one raised by an unwatched callee and caught there, and
one that unwinds a watched frame.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from types import FrameType
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from annotate.trace.record.monitor import Handlers, LineMonitor


def helper(x: int) -> int:
    return inner(x) + 1


def inner(x: int) -> int:
    y = x * 2
    if y > 100:
        raise ValueError("big")
    return y


def declined(x: int) -> int:
    z = x + 1
    return z


def outer(x: int) -> int:
    a = helper(x)
    b = declined(a)
    try:
        c = inner(a * 100)
    except ValueError:
        c = -1
    try:
        d = int("nope")
    except ValueError:
        d = 0
    return a + b + c + d


def unwinds(x: int) -> int:
    a = inner(x)
    return a


def program() -> list[Any]:
    out: list[Any] = [outer(3)]
    try:
        unwinds(1000)
    except ValueError:
        out.append("unwound")
    return out


WATCHED = (outer, inner, declined, unwinds)


def _handlers(log: list[list[Any]]) -> Handlers:
    """Handlers that log each call; frames of `declined` get no state (as an escape gets none)."""
    def start(frame: FrameType, code_id: int) -> Any:
        name = frame.f_code.co_name
        log.append(["start", name, frame.f_lineno])
        return None if name == "declined" else name

    def line(state: Any, frame: FrameType, lineno: int) -> None:
        log.append(["line", state, lineno])

    def ret(state: Any, frame: FrameType, value: Any) -> None:
        log.append(["return", state, value])

    def exception() -> None:
        log.append(["exception"])

    return Handlers(start, line, ret, exception)


def with_monitoring() -> list[list[Any]]:
    log: list[list[Any]] = []
    with LineMonitor([f.__code__ for f in WATCHED], _handlers(log)):
        log.append(["result", program()])
    return log


def with_settrace() -> list[list[Any]]:
    """The same handlers driven by `sys.settrace`, mapped as the recorder maps it."""
    log: list[list[Any]] = []
    h = _handlers(log)
    codes = {id(f.__code__) for f in WATCHED}

    def on_call(frame: FrameType, event: str, arg: Any) -> Callable | None:
        if id(frame.f_code) not in codes:
            return None
        state = h.start(frame, id(frame.f_code))
        if state is None:
            return None

        def local(frame: FrameType, event: str, arg: Any) -> Callable:
            if event == "line":
                h.line(state, frame, frame.f_lineno)
            elif event == "return":
                h.ret(state, frame, arg)
            elif event == "exception":
                h.exception()
            return local

        return local

    sys.settrace(on_call)
    try:
        result = program()
    finally:
        sys.settrace(None)
    log.append(["result", result])
    return log


def _dedupe(log: list[list[Any]]) -> list[list[Any]]:
    """One "exception" per run of them: `sys.settrace` reports one per frame an exception reaches,
    sys.monitoring one per RAISE and one per EXCEPTION_HANDLED; the recorder's response (forget
    every shared copy) is the same for one or several."""
    out: list[list[Any]] = []
    for entry in log:
        if entry == ["exception"] and out and out[-1] == ["exception"]:
            continue
        out.append(entry)
    return out


def eager_fallback() -> dict[str, int]:
    """The recorder's escapes when Dynamo is forced eager (a 1-layer tiny model, nothing compiled):
    under sys.monitoring an original compiled body that runs outside a replay must still be seen."""
    import torch

    from annotate.trace.model import runtime
    from annotate.trace.record.recorder import Recorder

    root = Path(__file__).resolve().parents[1]
    rt = runtime.build_runtime(runtime.TraceOptions(preset="tiny", layers=1, tokens=3, root=root))
    try:
        rec = Recorder(rt.model, runtime.import_vendored(root, "cpu"), runtime.vendor_root(root))
        with torch.compiler.set_stance("force_eager"), rec.recording():
            runtime.run_prefill(rt)
    finally:
        rt.close()
    return {"backend": rec.backend, **rec.escapes}   # type: ignore[dict-item]


if __name__ == "__main__":
    if sys.argv[1:] == ["--fallback"]:
        print(json.dumps(eager_fallback()))
    else:
        print(json.dumps({"python": sys.version.split()[0], "monitoring": _dedupe(with_monitoring()),
                          "settrace": _dedupe(with_settrace())}))
