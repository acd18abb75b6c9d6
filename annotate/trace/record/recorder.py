"""Line recorder for nano-vllm's decoder path, with eager replay of the compiled bodies.

* Line events of the code objects of the Python-level forwards only (Qwen3Model,
  Qwen3DecoderLayer, Qwen3Attention, Qwen3MLP, RMSNorm) — from `sys.monitoring` on Python ≥ 3.12
  (`monitor.py`), from `sys.settrace` before — drive one set of handlers, which record after every executed statement a
  clone of each tensor it assigns, plus `hidden_states` / `residual` when live, with the layer and
  module the frame belongs to. Compiled functions are not traced and keep running compiled.
* The compiled bodies (`RMSNorm.rms_forward`, `RMSNorm.add_rms_forward`, `SiluAndMul.forward`,
  `RotaryEmbedding.forward`) are wrapped per instance: the wrapper clones the inputs, calls the
  compiled function unchanged and clones its outputs. When the recorded forward is done, the
  original Python body (`internals.original_callable`) is replayed eagerly on those clones under the
  same line tracer (its records are ordered back at the call), and the fused outputs are compared
  with the eager ones (max |Δ|, max ulps).
* Copies are shared while a tensor provably has not changed since the last one (`copies.py`): a
  value returned, assigned and passed on is copied once.
* "Compiled paths ran compiled" is checked, not assumed: the original bodies' code objects are
  watched too, and any frame of theirs outside a replay (i.e. the compiled function fell back to
  eager) is counted as an escape. With `sys.settrace` on 3.11, once Inductor's own count of graph
  runs has agreed with that for a function (`graphs.py`), its later calls run untraced and a call
  that ran no graph is the escape.
* Everything that can wait — layers, hit counts, aliasing (`aliasing.py`) — is worked out when the
  records are first read, from what the hooks kept.
"""
from __future__ import annotations

import gc
import re
import sys
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import CodeType, FrameType
from typing import Any, Callable, Iterator

import torch

from annotate.trace.record.aliasing import AliasGroup, StorageKeys, alias_groups, tensors as _tensors
from annotate.trace.model import internals
from annotate.trace.record.copies import CopyCache, clone, reads_only
from annotate.trace.model.graphs import GraphCounter
from annotate.trace.record.identity import key as key_of
from annotate.trace.record.monitor import CALLER_DEPTH, Handlers, LineMonitor
from annotate.trace.model.options import check_backend, default_backend
from annotate.trace.model.numerics import Distance, distance
from annotate.trace.record.sourcemap import CodeInfo, TracedStatement, code_info

LIVE = ("hidden_states", "residual")
_LAYER_RE = re.compile(r"(?:^|\.)layers\.(\d+)(?:\.|$)")


@dataclass(slots=True)
class RawVar:
    """A recorded tensor: a copy (shared with other records while provably unchanged), so later
    in-place updates cannot change it."""

    name: str
    tensor: torch.Tensor
    role: str            # "assigned", "live", "return", "argument"


@dataclass(slots=True)   # hundreds are built per forward (`_materialize`)
class RawRecord:
    """Values after one execution of one statement (or at a function's entry)."""

    function: str
    file: str
    line: int
    end_line: int
    kind: str            # "entry" | "line"
    source: str          # "traced" | "replay"
    layer: int | None
    module: str | None
    call: int
    hit: int
    order: int
    text: str
    vars: list[RawVar]
    aliases: list[AliasGroup] = field(default_factory=list)
    sort_key: tuple[int, int, int] = (0, 0, 0)


@dataclass
class CompiledCheck:
    """Fused (compiled) outputs vs the eager replay of the same body on the same inputs."""

    function: str
    file: str
    line: int
    module: str | None
    layer: int | None
    call: int
    outputs: list[tuple[str, Distance]]


@dataclass(slots=True)
class _Frame:
    """Per-frame state of the line tracer."""

    info: CodeInfo
    source: str
    module: str | None
    layer: int | None
    call: int
    owner: Any = None                  # the frame's `self` (a module), if any
    frame: FrameType | None = None     # while it runs (`_return` lets it go)
    current: TracedStatement | None = None
    read_only_call: bool = False       # `current`'s one call is a Tensor method that writes nothing
    hits: dict[tuple[int, int | None], int] = field(default_factory=dict)


@dataclass
class _Pending:
    """A compiled call waiting for its eager replay: cloned inputs and fused outputs."""

    qual: str
    orig: Callable
    module: torch.nn.Module
    caller: tuple[Any, str | None]   # the traced caller's (self, module name): names the instance later
    inputs: list[Any]
    fused: list[tuple[str, torch.Tensor]]
    anchor: int
    inference_mode: bool   # the replay runs in the grad mode of the call (in-place ops need it)


@dataclass(frozen=True)   # shared by the replays of one (instance, caller)
class _Replay:
    """Context of one eager replay: who it stands for."""

    module: str | None
    layer: int | None


@contextmanager
def _no_cyclic_gc() -> Iterator[None]:
    """The cyclic collector off while the block runs (then as it was). Recording leaves a few small
    containers behind per statement (copies, a snapshot of the locals), and building the records a
    few objects per record; none form cycles, but with the collector on they trigger collections
    that walk every tracked object of the process (torch's and Dynamo's included)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def layer_of(module_name: str | None) -> int | None:
    """`model.layers.3.mlp` → 3; None outside the decoder layers."""
    m = _LAYER_RE.search(module_name or "")
    return int(m.group(1)) if m else None


def unwrap_compiled(cls: type, attr: str) -> Callable:
    """The original Python function behind a `@torch.compile`d method of `cls`."""
    orig = internals.original_callable(cls.__dict__[attr])
    if orig is None:
        raise RuntimeError(f"{cls.__name__}.{attr} is not a torch.compile'd function")
    return orig


#: the tensor-parallel forwards a --tp run also traces, and the variable each holds live: `y` is the
#: partial sum after `F.linear` / `F.embedding` and, after `dist.all_reduce(y)` (in place), the full sum
PARALLEL_FORWARDS = {"RowParallelLinear.forward": ("y",), "VocabParallelEmbedding.forward": ("y",)}


def _watch_list(stmt: TracedStatement, live: tuple[str, ...] = LIVE) -> tuple[tuple[str, str], ...]:
    """(name, role) to look up after `stmt`: its targets, then the live names (`hidden_states` /
    `residual`) when it does not assign them."""
    bound = stmt.statement.bound_names
    return tuple((n, "assigned") for n in bound) + tuple((n, "live") for n in live if n not in bound)


#: set the trace function aside while the compiled-call wrapper does its bookkeeping (see `_wrapper`)
_SUSPEND = sys.version_info < (3, 12)


#: nn.Module's call machinery: frames a call passes through between a caller and its forward
_MODULE_CALL = frozenset(key_of(f.__code__) for f in internals.module_call_functions())


class Recorder:
    """Records a forward of the vendored model; `install()` once, then `with recording(): …`."""

    def __init__(self, model: torch.nn.Module, mods: dict[str, Any], vendor_root: Path, replay: bool = True,
                 traced: dict[str, Callable] | None = None, parallel: bool = False,
                 backend: str | None = None, keep_replays: bool = False) -> None:
        """``mods``: nano-vllm's vendored modules (its forwards are traced, its compiled bodies replayed).
        ``traced`` instead names the Python functions to trace in another model (HF transformers'
        Qwen3, eager): nothing is compiled there, so nothing is wrapped or replayed. ``parallel``
        also traces the tensor-parallel forwards (:data:`PARALLEL_FORWARDS`) where the all_reduces are.
        ``backend``: where line events come from, `monitoring` (PEP 669, the default on Python ≥ 3.12)
        or `settrace`; both give the same records (`monitor.py`). ``keep_replays``: keep each replayed
        compiled call (its saved inputs) in `kept_replays` (the benchmark replays them untraced)."""
        self.model = model
        self.backend = check_backend(backend or default_backend())
        self.replay = replay  # False: line values only (the benchmark uses it to split the overhead)
        self.vendor_root = vendor_root
        self.compiled_targets: list[tuple[type, str, str]] = []
        helpers: list[tuple[Callable, str]] = []
        if traced is None:
            q, ln, act, rope = mods["qwen3"], mods["layernorm"], mods["activation"], mods["rotary"]
            traced = {
                "Qwen3Model.forward": q.Qwen3Model.forward,
                "Qwen3DecoderLayer.forward": q.Qwen3DecoderLayer.forward,
                "Qwen3Attention.forward": q.Qwen3Attention.forward,
                "Qwen3MLP.forward": q.Qwen3MLP.forward,
                "RMSNorm.forward": ln.RMSNorm.forward,
            }
            self.compiled_targets = [
                (ln.RMSNorm, "rms_forward", "RMSNorm.rms_forward"),
                (ln.RMSNorm, "add_rms_forward", "RMSNorm.add_rms_forward"),
                (act.SiluAndMul, "forward", "SiluAndMul.forward"),
                (rope.RotaryEmbedding, "forward", "RotaryEmbedding.forward"),
            ]
            helpers = [(rope.apply_rotary_emb, "apply_rotary_emb")]   # inlined into RotaryEmbedding.forward when compiled
            if parallel:
                traced["RowParallelLinear.forward"] = mods["linear"].RowParallelLinear.forward
                traced["VocabParallelEmbedding.forward"] = mods["embed_head"].VocabParallelEmbedding.forward
        self.traced: dict[CodeType, CodeInfo] = {}
        for qual, fn in traced.items():
            info = code_info(fn, qual, vendor_root)
            self.traced[info.code] = info
        self.bodies: dict[CodeType, CodeInfo] = {}
        self.originals: dict[str, Callable] = {}
        for cls, attr, qual in self.compiled_targets:
            orig = unwrap_compiled(cls, attr)
            self.originals[qual] = orig
            info = code_info(orig, qual, vendor_root)
            self.bodies[info.code] = info
        for fn, qual in helpers:
            helper = code_info(fn, qual, vendor_root)
            self.bodies[helper.code] = helper
        # keyed by identity (`identity.key`): hashing a code object hashes its bytecode, names and
        # constants (~0.35 µs, not cached), and this lookup runs for every Python call in the
        # forward; the code objects stay alive with their functions, so their keys cannot be reused
        self._watched: dict[int, tuple[CodeInfo, str]] = {
            **{key_of(c): (i, "replay") for c, i in self.bodies.items()},
            **{key_of(c): (i, "traced") for c, i in self.traced.items()}}
        self.names = {key_of(m): n for n, m in model.named_modules()}
        self._modules = list(model.modules())   # the module tree is fixed once recorded (as `names` assumes)
        self._where: dict[int, tuple[str | None, int | None]] = {}   # key_of(module) -> (name, layer)
        self._watch: dict[int, tuple[TracedStatement, tuple[tuple[str, str], ...]]] = {}   # key_of(statement) -> names to look up
        self._records: list[RawRecord] = []
        #: finished statements and entries as the forward produced them (see `_materialize`)
        #: per finished statement (or entry, stmt None): frame, statement, its variables (copies), locals, return, order
        self._raw: list[tuple[_Frame, TracedStatement | None, list[RawVar], dict[str, Any], Any,
                              tuple[int, int, int]]] = []
        self._checks: list[CompiledCheck] = []
        self._pending: list[tuple[str, str, int, str | None, int, list[tuple[str, torch.Tensor]], list[torch.Tensor]]] = []
        self._files: dict[str, str] = {}
        #: where each compiled body is defined, for its fused-vs-eager check (read once: `__code__` is audited)
        self._defined = {qual: (self._file_of(fn), fn.__code__.co_firstlineno) for qual, fn in self.originals.items()}
        self._replays: list[_Pending] = []
        self.keep_replays = keep_replays
        self.kept_replays: list[_Pending] = []
        #: who each replay stands for, by (instance, caller's self, caller's module name): see `_instance_name`
        self._replay_where: dict[tuple[int, int, str | None], _Replay] = {}
        self._anchor: int | None = None
        self._sub = 0
        self.compiled_calls: dict[str, int] = {}
        self.escapes: dict[str, int] = {}
        self.active = False
        self.copies = CopyCache()
        self.graphs = GraphCounter()
        self._direct_calls = False   # set per recording: whether module calls can be seen through
        self._contract = False       # set per recording: whether Tensor methods run torch's own code
        self.replay_stack: list[_Replay] = []
        self.frames: list[_Frame] = []
        self.calls: dict[tuple[str, str | None], int] = {}
        self._check_calls: dict[tuple[str, str | None], int] = {}
        self._installed: list[tuple[torch.nn.Module, str]] = []
        self._order = 0

    # ------------------------------------------------------------ compiled wrappers

    def install(self) -> None:
        """Wrap each compiled method on each instance (the class and its compiled code stay as they are)."""
        if self._installed:
            return
        seen: set[tuple[int, str]] = set()
        for module in self.model.modules():
            for cls, attr, qual in self.compiled_targets:
                if isinstance(module, cls) and (id(module), attr) not in seen:
                    seen.add((id(module), attr))
                    compiled = cls.__dict__[attr].__get__(module)
                    setattr(module, attr, self._wrapper(module, attr, qual, compiled))
                    self._installed.append((module, attr))

    def uninstall(self) -> None:
        """Remove the wrappers: calls go straight to the compiled functions again."""
        for module, attr in self._installed:
            module.__dict__.pop(attr, None)
        self._installed.clear()

    def _wrapper(self, module: torch.nn.Module, attr: str, qual: str, compiled: Callable) -> Callable:
        """Call the compiled function; when recording, also keep what its eager replay needs.

        The wrapper is called by the traced program, so Python code in it would itself run traced
        (every call and line through the interpreter's tracing path). On Python ≤ 3.11 it runs
        with the trace function set aside, as the trace callbacks do. The compiled call itself runs
        traced, so that an eager fallback shows up as a frame of the original body, until Inductor's
        own count of graph runs has proved itself for that function (`graphs.py`); from then on it
        runs untraced too (Dynamo's and Inductor's Python wrappers cost ~0.6 ms per 4-layer
        forward under the tracer), and a call that ran no compiled graph is the escape. From 3.12
        on each `sys.settrace` re-instruments code, so the tracer is left on there."""
        orig = self.originals[qual]

        def call_compiled(*args: Any) -> Any:
            if not self.active:
                return compiled(*args)
            if not _SUSPEND:   # the tracer stays on (3.12+): an eager fallback shows as a frame of `orig`
                ticket = self._before_compiled(call_compiled, qual, orig, module, sys._getframe(CALLER_DEPTH), args)
                out = compiled(*args)
                self._after_compiled(ticket, out)
                return out
            # inline rather than a context manager: its __enter__ would itself run traced
            tracer = sys.gettrace()
            if _SUSPEND:
                sys.settrace(None)
            try:
                ticket = self._before_compiled(call_compiled, qual, orig, module, sys._getframe(CALLER_DEPTH), args)
                graphs = self.graphs
                counted = _SUSPEND and graphs.trusted.get(qual, False)
                if _SUSPEND and not counted:
                    sys.settrace(tracer)   # let the tracer see an eager fallback
                runs, escapes = graphs.count(), self.escapes.get(qual, 0)
                try:
                    out = compiled(*args)
                finally:
                    if _SUSPEND:
                        sys.settrace(None)
                ran_graph = graphs.count() > runs
                if counted and not ran_graph:
                    self.escapes[qual] = escapes + 1            # no compiled graph ran: eager
                elif _SUSPEND and not counted and qual not in graphs.trusted and self.escapes.get(qual, 0) == escapes:
                    graphs.trusted[qual] = ran_graph and graphs.available   # traced, no eager frame: judge the count
                self._after_compiled(ticket, out)
            finally:
                if _SUSPEND:
                    sys.settrace(tracer)
            return out

        call_compiled.__wrapped__ = compiled  # type: ignore[attr-defined]
        return call_compiled

    def _before_compiled(self, who: Callable, qual: str, orig: Callable, module: torch.nn.Module,
                         origin: FrameType, args: tuple[Any, ...]) -> tuple[Any, ...]:
        """Just before a compiled call: count it, and (with replays) keep copies of its inputs."""
        caller = self.frames[-1] if self.frames else None
        direct = caller is not None and self._reaches(origin, caller.frame)
        self.copies.entered(who, caller, direct)
        self.compiled_calls[qual] = self.compiled_calls.get(qual, 0) + 1
        if not self.replay:
            return (caller, direct, None)
        take = self.copies.take
        inputs = [take(a) if isinstance(a, torch.Tensor) else a for a in args]
        where = (caller.owner, caller.module) if caller is not None else (None, None)
        return (caller, direct, (qual, orig, module, where, inputs, self._order, torch.is_inference_mode_enabled()))

    def _after_compiled(self, ticket: tuple[Any, ...], out: Any) -> None:
        """Just after: the body may have written to its inputs, so no earlier copy is reused; with
        replays, keep the fused outputs for the fused-vs-eager comparison."""
        caller, direct, pending = ticket
        self.copies.forget()
        if pending is not None:
            qual, orig, module, where, inputs, anchor, inference = pending
            fused = [(n, self.copies.take(t)) for n, t in _tensors(out, "return")]
            self._replays.append(_Pending(qual, orig, module, where, inputs, fused, anchor, inference))
        self.copies.returned(caller, direct)

    def _instance_name(self, module: torch.nn.Module, caller: tuple[Any, str | None]) -> str | None:
        """Module name as seen from the traced caller (a shared module, like the rope, gets the
        caller's path). Worked out at replay time, off the recorded forward."""
        owner, caller_module = caller
        if owner is module:
            return caller_module
        if owner is not None and caller_module:
            for child_name, child in owner.named_children():
                if child is module:
                    return f"{caller_module}.{child_name}"
        name = self.names.get(key_of(module))
        return name if name is not None else type(module).__name__

    def _run_replays(self) -> None:
        """Replay each compiled call's original body eagerly on its cloned inputs, under the line
        tracer. Deferred to the end of the recorded forward so that the fused path itself only pays
        for the clones; the replayed records are put back at the place of their call (`order`)."""
        if self.keep_replays:
            self.kept_replays = list(self._replays)
        while self._replays:
            mode = self._replays[0].inference_mode
            with torch.inference_mode(mode):   # one context for the run of replays that share it
                while self._replays and self._replays[0].inference_mode == mode:
                    self._replay(self._replays.pop(0))

    def _replay(self, p: _Pending) -> None:
        """One compiled call's eager replay (see `_run_replays`), in the grad mode of the call."""
        who = (key_of(p.module), key_of(p.caller[0]), p.caller[1])
        where = self._replay_where.get(who)
        if where is None:   # the module tree is fixed: once per (instance, caller)
            name = self._instance_name(p.module, p.caller)
            where = self._replay_where[who] = _Replay(name, layer_of(name))
        self.replay_stack.append(where)
        self._anchor = p.anchor
        self.copies.forget()
        # the body may write to its inputs (float32 runs do): give it copies of its own, so the
        # recorded values that share the saved inputs stay as they were
        inputs = [clone(a) if isinstance(a, torch.Tensor) else a for a in p.inputs]
        try:
            ref = p.orig(p.module, *inputs)
        finally:
            self.replay_stack.pop()
            self._anchor = None
        self._check(p.qual, where.module, p.fused, ref)

    def _check(self, qual: str, module: str | None, fused: list[tuple[str, torch.Tensor]],
               ref: Any) -> None:
        """Keep the fused and eager outputs; distances are computed on demand (`checks`)."""
        call = self._check_calls.get((qual, module), 0)
        self._check_calls[(qual, module)] = call + 1
        eager = [t for _, t in _tensors(ref, "return")]
        file, line = self._defined[qual]
        self._pending.append((qual, file, line, module, call, fused, eager))

    @property
    def checks(self) -> list[CompiledCheck]:
        """Fused-vs-eager distance of every output of every compiled call recorded so far."""
        while self._pending:
            qual, file, line, module, call, fused, eager = self._pending.pop(0)
            outputs = [(n, distance(a, b)) for (n, a), b in zip(fused, eager)]
            self._checks.append(CompiledCheck(qual, file, line, module, layer_of(module), call, outputs))
        return self._checks

    def _file_of(self, fn: Callable) -> str:
        """Path of `fn`'s file relative to the vendor root (cached by file name)."""
        name = fn.__code__.co_filename
        if name not in self._files:
            path = Path(name).resolve()
            try:
                self._files[name] = path.relative_to(self.vendor_root.resolve()).as_posix()
            except ValueError:
                self._files[name] = path.as_posix()
        return self._files[name]

    # ------------------------------------------------------------ tracing

    @contextmanager
    def recording(self) -> Iterator[None]:
        """Trace and replay while the block runs; compiled functions still run compiled."""
        self.install()
        # no hook anywhere and no module-level compile: nn.Module's call machinery then only passes
        # arguments and results through; no mode installed: Tensor methods run torch's own code
        self._direct_calls = not internals.hooks_installed(self.model, self._modules)
        self._contract = not internals.modes_installed()
        self.copies.clear()
        if _SUSPEND:   # the count only decides when the 3.11 tracer may be set aside (`_wrapper`)
            self.graphs.start()
        self.active = True
        try:
            with _no_cyclic_gc(), self._line_events():
                yield
                self._run_replays()
            # the records are built when first asked for (`records`): bookkeeping, off the hot path
        finally:
            self.active = False
            self._replays.clear()
            self.copies.forget()   # (its counts stay: they describe this recording)
            self.graphs.stop()     # (so does what it trusted)

    def _line_events(self) -> AbstractContextManager[Any]:
        """Line events of the watched code objects while the block runs, from the chosen backend."""
        if self.backend == "monitoring":
            watched = self._watched

            def start(frame: FrameType, code_id: int) -> _Frame | None:
                return self._watched_frame(frame, *watched[code_id])

            codes = [*self.bodies, *self.traced]
            return LineMonitor(codes, Handlers(start, self._line, self._return, self.copies.forget))
        return self._settrace()

    @contextmanager
    def _settrace(self) -> Iterator[None]:
        """`sys.settrace` with the global trace function below, then whatever was set before."""
        previous = sys.gettrace()
        sys.settrace(self._global_tracer())
        try:
            yield
        finally:
            sys.settrace(previous)

    def _global_tracer(self) -> Callable:
        """The global trace function: only the chosen code objects get a line tracer.

        It runs for every Python call the traced forward makes (nn.Module's machinery above all),
        so it is a closure over a bound `dict.get` keyed by the code's `identity.key` — no attribute
        lookups, no code-object hashing — and does nothing else for frames it does not watch."""
        watched_get = self._watched.get

        def on_call(frame: FrameType, event: str, arg: Any) -> Callable | None:
            watched = watched_get(key_of(frame.f_code))
            if watched is None:
                return None
            return self._on_watched(frame, *watched)

        return on_call

    def _on_watched(self, frame: FrameType, info: CodeInfo, source: str) -> Callable | None:
        state = self._watched_frame(frame, info, source)
        return None if state is None else self._local_tracer(state)

    def _watched_frame(self, frame: FrameType, info: CodeInfo, source: str) -> _Frame | None:
        """A frame of a watched code object starts: its state, or None when it is not recorded."""
        if source == "replay" and not self.replay_stack:
            # an original compiled body running outside a replay: the compiled path fell back to eager
            self.escapes[info.qualname] = self.escapes.get(info.qualname, 0) + 1
            return None
        return self._start_frame(frame, info, source)

    def _reaches(self, frame: FrameType | None, target: FrameType | None) -> bool:
        """`frame` is `target`, or only nn.Module's call machinery lies between them (no hooks)."""
        if not self._direct_calls or target is None:
            return False
        while frame is not None and frame is not target:
            if key_of(frame.f_code) not in _MODULE_CALL:
                return False
            frame = frame.f_back
        return frame is not None

    def _start_frame(self, frame: FrameType, info: CodeInfo, source: str) -> _Frame:
        """A watched frame has started: its layer and module, its entry record, its per-frame state."""
        f_locals = frame.f_locals   # each read of frame.f_locals syncs the dict again: read it once
        owner = f_locals.get("self")
        if source == "replay":
            ctx = self.replay_stack[-1]
            module, layer = ctx.module, ctx.layer
        else:
            owner_key = key_of(owner)
            where = self._where.get(owner_key)
            if where is None:
                name = self.names.get(owner_key) if owner is not None else None
                where = self._where[owner_key] = (name, layer_of(name))
            module, layer = where
        key = (info.qualname, module)
        call = self.calls.get(key, 0)
        self.calls[key] = call + 1
        state = _Frame(info, source, module, layer, call, owner, frame)
        caller = self.frames[-1] if self.frames else None
        self.copies.entered(state, caller, caller is not None and self._reaches(frame.f_back, caller.frame))
        self.frames.append(state)
        self._record_entry(f_locals, state)
        return state

    def _line(self, state: _Frame, frame: FrameType, lineno: int) -> None:
        """A line of a watched frame starts: if it begins another statement, the current one is done."""
        stmt = state.info.statements.get(lineno)
        if stmt is None or stmt is state.current:
            return
        self.copies.line(state, state.current, state.read_only_call)
        f_locals = self._finish(frame, state, None) if state.current is not None else None
        state.current = stmt
        method = stmt.statement.method
        if method is not None and method[0] != "self" and self._contract:
            # the locals `_finish` just read are the frame's as they are now: no second sync
            receiver = (frame.f_locals if f_locals is None else f_locals).get(method[0])
            state.read_only_call = reads_only(receiver, method[1])
        else:
            state.read_only_call = False

    def _return(self, state: _Frame, frame: FrameType, retval: Any) -> None:
        """A watched frame returns `retval` (None when an exception unwinds it)."""
        self.copies.line(state, state.current, state.read_only_call)
        if state.current is not None:
            self._finish(frame, state, retval)
            state.current = None
        if self.frames and self.frames[-1] is state:
            self.frames.pop()
        caller = self.frames[-1] if self.frames else None
        self.copies.returned(caller, caller is not None and self._reaches(frame.f_back, caller.frame))
        # the state lives on in the raw events until the records are built; its frame must not: a
        # frame object kept past its return keeps its callers' frames and their closures alive, and
        # the collector walks all of them after the recording (about a fifth of what it walks)
        state.frame = None

    def _local_tracer(self, state: _Frame) -> Callable:
        """`sys.settrace`'s per-frame trace function for one watched frame."""
        statements = state.info.statements

        def local(frame: FrameType, event: str, arg: Any) -> Callable:
            if event == "line":
                # the common case, a line inside the current statement, returns without a call
                stmt = statements.get(frame.f_lineno)
                if stmt is not None and stmt is not state.current:
                    self._line(state, frame, frame.f_lineno)
            elif event == "return":
                self._return(state, frame, arg)
            elif event == "exception":
                self.copies.forget()
            return local

        return local

    def _record_entry(self, f_locals: dict[str, Any], state: _Frame) -> None:
        """Tensor arguments at entry, recorded on the `def` line."""
        take = self.copies.take
        vars_: list[RawVar] = []
        for p in state.info.params:
            value = f_locals.get(p)
            if isinstance(value, torch.Tensor):
                vars_.append(RawVar(p, take(value), "argument"))
            elif isinstance(value, (tuple, list)) and p != "self":
                vars_ += [RawVar(n, take(t), "argument") for n, t in _tensors(value, p)]
        self._raw.append((state, None, vars_, f_locals.copy(), None, self._sort_key()))

    def _finish(self, frame: FrameType, state: _Frame, retval: Any) -> dict[str, Any]:
        """The statement `state.current` has completed: copy what it assigned (and the live pair).
        Returns the frame's locals as read now.

        This runs after every statement of the recorded forward, so it only takes the copies (each
        kept as the `RawVar` its record will hold) and a snapshot of the locals; records are built
        after the forward (`_materialize`)."""
        stmt = state.current
        assert stmt is not None, "a statement finished before one started"
        f_locals = frame.f_locals
        take = self.copies.take
        vars_: list[RawVar] = []
        watch = self._watch.get(key_of(stmt))
        if watch is None or watch[0] is not stmt:   # per statement, once: this runs after every one
            watch = self._watch[key_of(stmt)] = (stmt, _watch_list(stmt, PARALLEL_FORWARDS.get(state.info.qualname, LIVE)))
        for name, role in watch[1]:
            value = f_locals.get(name)
            if isinstance(value, torch.Tensor):
                vars_.append(RawVar(name, take(value), role))
            elif role == "assigned" and isinstance(value, (tuple, list)):
                vars_ += [RawVar(n, take(t), role) for n, t in _tensors(value, name)]
        is_return = stmt.statement.is_return
        if retval is not None and is_return:
            vars_ += [RawVar(n, take(t), "return") for n, t in _tensors(retval, "return")]
        if self._anchor is None:   # `_sort_key`, inlined
            self._order += 1
            key = (self._order - 1, 1, 0)
        else:
            key = self._sort_key()
        self._raw.append((state, stmt, vars_, f_locals.copy(), retval if is_return else None, key))
        return f_locals

    def _sort_key(self) -> tuple[int, int, int]:
        """Where a record goes in the final order: in event order, except that a deferred replay's
        records sort just before the record that followed its call."""
        if self._anchor is None:
            self._order += 1
            return (self._order - 1, 1, 0)
        self._sub += 1
        return (self._anchor, 0, self._sub - 1)

    def _materialize(self) -> None:
        """Turn the raw events into records, once the forward (and the replays) are over.

        During the forward each finished statement only costs its copies and one dict copy of the
        frame's locals; layers, hit counts and aliasing are worked out here. Aliasing from the
        snapshots is exact: they hold the tensors themselves, so none of them could be freed (and
        its memory handed to another tensor) before this runs."""
        with _no_cyclic_gc():
            self._build_records()

    def _build_records(self) -> None:
        """`_materialize`'s work."""
        keys: StorageKeys = {}   # storage keys by tensor identity, for this pass (see `alias_groups`)
        for state, stmt, vars_, f_locals, retval, key in self._raw:
            info = state.info
            if stmt is None:
                line, end, kind, text, layer, hit = info.def_line, info.def_line, "entry", "", state.layer, 0
            else:
                st = stmt.statement
                line, end, kind, text, layer = st.start_line, st.end_line, "line", st.text, state.layer
                for name in st.loop_targets if layer is None else ():
                    layer = layer_of(self.names.get(key_of(f_locals.get(name)))) if layer is None else layer
                hit = state.hits.get((line, layer), 0)
                state.hits[(line, layer)] = hit + 1
            aliases = alias_groups(f_locals, retval, {v.name for v in vars_}, keys)
            self._records.append(RawRecord(info.qualname, info.file, line, end, kind, state.source, layer,
                                          state.module, state.call, hit, 0, text, vars_, aliases, key))
        self._raw.clear()
        self._records.sort(key=lambda r: r.sort_key)
        for i, r in enumerate(self._records):
            r.order = i

    def reset(self) -> None:
        """Forget what was recorded (keep the wrappers): for repeated runs in one process."""
        self._records.clear()
        self._raw.clear()
        self._checks.clear()
        self._pending.clear()
        self.compiled_calls.clear()
        self.escapes.clear()
        self.calls.clear()
        self._check_calls.clear()
        self._order = 0
        self._sub = 0
        self._replays.clear()

    # ------------------------------------------------------------ results

    @property
    def records(self) -> list[RawRecord]:
        """Every record of the recordings so far, in program order. Built from the raw events on
        first access after a recording (layers, hit counts, aliasing: `_materialize`), so the
        recorded forward and its replays pay only for the copies."""
        if self._raw and not self.active:
            self._materialize()
        return self._records

    def code_infos(self) -> list[CodeInfo]:
        """Every function the recorder knows (traced forwards, compiled bodies, helpers)."""
        return list(self.traced.values()) + list(self.bodies.values())

    def graph_count_trusted(self) -> dict[str, bool]:
        """Per compiled function: whether its later calls were proved compiled by Inductor's graph
        count (True) or all ran under the tracer (False), as of the last recording."""
        return {q: bool(self.graphs.trusted.get(q, False)) for _, _, q in self.compiled_targets}

    def ran_compiled(self) -> bool:
        """Every compiled body was called and none of them ever ran its original bytecode outside a replay."""
        called = all(self.compiled_calls.get(q, 0) > 0 for _, _, q in self.compiled_targets)
        return called and not self.escapes
