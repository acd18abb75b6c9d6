"""The least Python a per-line recorder runs: a floor for the benchmark, not a recorder.

After each statement of the watched forwards, it reads the frame's locals once and keeps a snapshot
of them, as the recorder does (aliasing is worked out from it later). It copies each tensor held by
the statement's targets or the live names (`hidden_states`, `residual`), unless it already copied
that tensor object in this forward. It records no entries or returns, no compiled calls and no
replays. It never copies a tensor again after a write: a later in-place update would change what
an earlier line shows. So its records are not right, and a correct recorder does at least this much
work.

`bench_trace.py` runs it in the same rounds as the recorder. Its ratio above 1 is what any per-line
recorder written in Python pays here. The gap up to the recorder's `lines` ratio is what leaner
bookkeeping could still remove.

Two variants split that floor, in the same rounds:

* `no copies`: the same callbacks keeping each tensor itself instead of a
  copy. Its distance to the floor is what the copies cost inside the forward, where the forward's
  own work keeps evicting the caches between them (several times their cost in a loop).
* `events alone` (sys.monitoring only): the same local events on the same code
  objects, delivered to a builtin (C) callable that does nothing with them. What the interpreter's
  event machinery costs with no Python callback at all: what a recorder written in C would still pay
  for its events.

A recorder in C would pay at least the events and the copies: `events alone` + (`floor` − `no
copies`) − 1 above the plain forward. Two more variants measure that instead of deriving it
(sys.monitoring only): `C floor` and `C no copies` do the floor's work and its `no copies` work in
C (`line_floor_c.c`, built by `build_c_floor` with this interpreter's compiler, in a temporary folder),
with no Python run per event; each copy still goes through torch's Python binding (`Tensor.clone`).
`C lean` and `C lean, no copies` do less still: they read only the watched names, each from the
frame's own slot (`PyFrame_GetVar`, no sync of every local into a dict), and keep no snapshot of the
locals. That is the floor of a recorder whose aliasing is worked out from storage keys taken as it
copies, not from a snapshot per statement; its distance to `C floor` is what the snapshots cost.
"""
from __future__ import annotations

import importlib.machinery
import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Iterable

import torch

from annotate.trace.record.identity import key as key_of
from annotate.trace.record.recorder import _watch_list
from annotate.trace.record.sourcemap import CodeInfo, TracedStatement

#: variant name (`record`'s argument) -> the mode of its rows in bench/results/trace*.json
VARIANTS = {"floor": "lines, least Python (floor)", "no copies": "lines, least Python, no copies",
            "events alone": "line events alone (C callback)",
            "C floor": "lines, least work in C (floor)", "C no copies": "lines, least work in C, no copies",
            "C lean": "lines, least work in C, watched names only",
            "C lean, no copies": "lines, least work in C, watched names only, no copies"}
#: the variants written in C (`line_floor_c.c`, built by `build_c_floor`)
C_VARIANTS = ("C floor", "C no copies", "C lean", "C lean, no copies")
#: the C variants that read only the watched names (`PyFrame_GetVar`) and keep no snapshot
LEAN_VARIANTS = ("C lean", "C lean, no copies")
#: the variants that keep copies (the others keep the tensors themselves)
COPYING = ("floor", "C floor", "C lean")
#: the variants that run on sys.monitoring only (their callbacks are builtins)
MONITORING_ONLY = frozenset({"events alone", *C_VARIANTS})
C_SOURCE = Path(__file__).with_name("line_floor_c.c")
_C_SETUP = """\
from setuptools import Extension, setup
setup(name="line-floor-c", script_args=["build_ext", "--inplace", "-q"],
      ext_modules=[Extension("_line_floor_c", ["line_floor_c.c"], extra_compile_args=["-O2"])])
"""


class _Floor:
    """Per-statement work and what it kept (see the module docstring)."""

    def __init__(self, infos: Iterable[CodeInfo], copy: bool = True) -> None:
        self.infos = list(infos)
        self.copy = copy
        self.statements = {key_of(i.code): i.statements for i in self.infos}
        # the names the recorder looks up after each statement (its targets, then the live ones)
        self.watch = {key_of(s): tuple(n for n, _ in _watch_list(s)) for i in self.infos for s in i.statements.values()}
        self.raw: list[tuple[TracedStatement, list[tuple[str, torch.Tensor]], dict[str, Any]]] = []
        self.copies: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}

    def finish(self, frame: Any, stmt: TracedStatement) -> None:
        f_locals = frame.f_locals
        kept = []
        for name in self.watch[key_of(stmt)]:
            value = f_locals.get(name)
            if isinstance(value, torch.Tensor):
                ident = key_of(value)
                hit = self.copies.get(ident)
                if hit is None or hit[0] is not value:
                    hit = self.copies[ident] = (value, value.clone() if self.copy else value)
                kept.append((name, hit[1]))
        self.raw.append((stmt, kept, f_locals.copy()))


def _watching(codes: list[Any], callbacks: tuple[Callable[..., Any], Callable[..., Any], Callable[..., Any]],
              name: str, run: Callable[[], None]) -> None:
    """`run()` with sys.monitoring's PY_START, LINE and PY_RETURN events of `codes` only, delivered to
    `callbacks` (in that order) under a free tool id named `name`; everything undone afterwards."""
    mon = sys.monitoring  # type: ignore[attr-defined,unused-ignore]
    ev = mon.events
    tool = next(t for t in (5, 4, 3, 2, 1, 0) if mon.get_tool(t) is None)
    events = dict(zip((ev.PY_START, ev.LINE, ev.PY_RETURN), callbacks))
    mon.use_tool_id(tool, name)
    try:
        for event, callback in events.items():
            mon.register_callback(tool, event, callback)
        for code in codes:
            mon.set_local_events(tool, code, ev.PY_START | ev.LINE | ev.PY_RETURN)
        run()
    finally:
        for code in codes:
            mon.set_local_events(tool, code, 0)
        for event in events:
            mon.register_callback(tool, event, None)
        mon.free_tool_id(tool)


def _monitoring(floor: _Floor, run: Callable[[], None]) -> None:
    """`run()` with line events from sys.monitoring on the watched code objects only."""
    stack: list[list[Any]] = []   # [frame, its statements, the current one]
    getframe, statements, finish = sys._getframe, floor.statements, floor.finish

    def on_start(code: Any, offset: int) -> None:
        stack.append([getframe(1), statements[key_of(code)], None])

    def on_line(code: Any, lineno: int) -> None:
        top = stack[-1]
        stmt = top[1].get(lineno)
        if stmt is not None and stmt is not top[2]:
            done, top[2] = top[2], stmt
            if done is not None:
                finish(top[0], done)

    def on_return(code: Any, offset: int, value: Any) -> None:
        top = stack.pop()
        if top[2] is not None:
            finish(top[0], top[2])

    _watching([i.code for i in floor.infos], (on_start, on_line, on_return), "annotate-bench-floor", run)


def _settrace(floor: _Floor, run: Callable[[], None]) -> None:
    """`run()` under sys.settrace, with a line tracer for the watched code objects only."""
    statements, finish = floor.statements, floor.finish

    def on_call(frame: Any, event: str, arg: Any) -> Callable | None:
        stmts = statements.get(key_of(frame.f_code))
        if stmts is None:
            return None
        state: list[Any] = [None]

        def local(frame: Any, event: str, arg: Any) -> Callable:
            if event == "line":
                stmt = stmts.get(frame.f_lineno)
                if stmt is not None and stmt is not state[0]:
                    done, state[0] = state[0], stmt
                    if done is not None:
                        finish(frame, done)
            elif event == "return" and state[0] is not None:
                finish(frame, state[0])
            return local

        return local

    previous = sys.gettrace()
    sys.settrace(on_call)
    try:
        run()
    finally:
        sys.settrace(previous)


def _events_alone(infos: Iterable[CodeInfo], run: Callable[[], None]) -> int:
    """`run()` with the floor's local events (PY_START, LINE, PY_RETURN) on the watched code objects,
    delivered to `slice`: a builtin that takes their two or three arguments and runs no Python.
    Records nothing (returns 0)."""
    _watching([i.code for i in infos], (slice, slice, slice), "annotate-bench-events", run)
    return 0


def build_c_floor(work: Path) -> ModuleType | str:
    """Compile `line_floor_c.c` for this interpreter in `work` and load it; or why it could not be
    built (one line: no compiler, no headers, no sys.monitoring)."""
    if not hasattr(sys, "monitoring"):
        return "the C floor needs sys.monitoring (Python 3.12 or newer)"
    (work / "line_floor_c.c").write_bytes(C_SOURCE.read_bytes())
    (work / "setup_c_floor.py").write_text(_C_SETUP, encoding="utf-8")
    done = subprocess.run([sys.executable, "setup_c_floor.py"], cwd=work, capture_output=True, text=True)
    built = sorted(work.glob("_line_floor_c*" + importlib.machinery.EXTENSION_SUFFIXES[0]))
    if done.returncode != 0 or not built:
        last = (done.stderr or done.stdout).strip().splitlines()
        return "the C floor did not build: " + (last[-1] if last else f"exit {done.returncode}")
    spec = importlib.util.spec_from_file_location("_line_floor_c", built[0])
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _c_monitoring(infos: Iterable[CodeInfo], run: Callable[[], None], c_floor: ModuleType, copy: bool,
                  lean: bool = False) -> list[Any]:
    """`run()` with the C floor's callbacks on the watched code objects' local events; returns what
    it kept, `(statement, [(name, copy)], snapshot)` per finished statement (`lean`: the watched names
    read from their slots, the snapshot None)."""
    infos = list(infos)
    watch = {key_of(s): tuple(n for n, _ in _watch_list(s)) for i in infos for s in i.statements.values()}
    # keyed by address (`id`, read once here): the C callbacks look a code object up by its address
    statements = {id(i.code): {line: (s, watch[key_of(s)]) for line, s in i.statements.items()} for i in infos}
    floor = c_floor.Floor(statements, torch.Tensor, copy, lean)
    _watching([i.code for i in infos], (floor.on_start, floor.on_line, floor.on_return), "annotate-bench-c-floor", run)
    return list(floor.raw)


def record(infos: Iterable[CodeInfo], run: Callable[[], None], backend: str, variant: str = "floor",
           c_floor: ModuleType | None = None) -> int:
    """Run `run()` under the floor recorder (`variant`: a key of :data:`VARIANTS`) with line events
    from `backend` (`monitoring` or `settrace`); returns how many statements it recorded (0 for
    `events alone`, which records nothing)."""
    if variant in MONITORING_ONLY and backend != "monitoring":
        raise ValueError(f"{variant}: sys.monitoring only (settrace has no builtin callbacks)")
    if variant == "events alone":
        return _events_alone(infos, run)
    if variant in C_VARIANTS:
        if c_floor is None:
            raise ValueError(f"{variant}: needs the built C floor (`build_c_floor`)")
        return len(_c_monitoring(infos, run, c_floor, copy=variant in COPYING, lean=variant in LEAN_VARIANTS))
    floor = _Floor(infos, copy=variant in COPYING)
    (_monitoring if backend == "monitoring" else _settrace)(floor, run)
    return len(floor.raw)
