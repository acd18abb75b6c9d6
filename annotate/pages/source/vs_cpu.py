"""A device trace's values beside the CPU's: the same line, layer, call and variable, computed at build time.

A device (GPU) trace keeps no tensors, so only what both traces' summaries carry can be compared: the
first values of each tensor (``head``, six of them) and its L2 norm. Two traces are comparable when they
ran the same generated model (preset, config apart from the depth, seed) on inputs of which one is a
prefix of the other; the generated weights of layer ℓ do not depend on how many layers follow
(annotate/trace/model/runtime.py draws them in layer order), so:

- the first values of a tensor whose first axis is the tokens compare while they lie in the shared token
  prefix (attention is causal: token t sees tokens ≤ t only) and in a layer both runs have;
- everything (first values of any tensor, and the norm) compares when both ran the same ids and depth.

Outside the layers (embedding, final norm) only runs of the same depth compare: the final norm's γ is
drawn after every layer. Distances are max |Δ| in ulps of the coarser dtype at the tensor's largest
magnitude (as the trace's own ``scale_ulps``: a sign flip near zero does not read as millions of ulps),
and relative (‖Δ‖₂ / ‖cpu‖₂ over the values compared).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

from annotate.pages.base.trace_set import TraceView
from annotate.pages.base.tracefmt import num
from annotate.trace.format.schema import LineRecord, VarRecord

#: explicit mantissa bits of each float dtype (a value's ulp is 2^(exponent − bits))
FLOAT_BITS = {"float64": 52, "float32": 23, "float16": 10, "bfloat16": 7}
#: config fields that follow the depth (they may differ between comparable runs)
_DEPTH_FIELDS = ("num_hidden_layers", "max_window_layers")

LineKey = tuple[str, int, str, str, "int | None", "str | None", int, int]


def record_key(rec: LineRecord) -> LineKey:
    """What names one execution of a line in both traces: file, line, kind, source, layer, module, call, pass."""
    return (rec.file, rec.line, rec.kind, rec.source, rec.layer, rec.module, rec.call, rec.hit)


@dataclass
class CpuPeer:
    """The CPU trace a device trace is compared with, and how far the two runs are the same run."""

    device: TraceView
    cpu: TraceView
    shared_tokens: int      # the common prefix of the two runs' input ids
    same_input: bool        # identical ids
    same_depth: bool
    _index: dict[LineKey, LineRecord] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        for r in self.cpu.trace.records:
            if r.placed:
                self._index.setdefault(record_key(r), r)

    @property
    def what(self) -> str:
        """Which CPU trace and what of it, Chinese first, for the panel's line."""
        scope = ("同一输入同一深度：比较前几个值和范数 same input and depth: first values and norms"
                 if self.same_input and self.same_depth else
                 f"共有的前 {self.shared_tokens} 个词元、两者都有的层：只比较前几个值 — the first values only, within the "
                 f"{self.shared_tokens} tokens and the layers both runs share")
        return f"{self.cpu.where}（{self.cpu.label}）；{scope}"

    def compare(self, rec: LineRecord, var: VarRecord) -> HeadComparison | None:
        """The CPU's value of `var` at the same execution of the same line, compared (None: nothing comparable)."""
        other = self._index.get(record_key(rec))
        theirs = other.var(var.name) if other is not None else None
        if other is None or theirs is None or not self._comparable(rec, var, theirs):
            return None
        return compare_values(var, theirs, self.same_input and self.same_depth and var.shape == theirs.shape,
                              coarser_name(self.device.dtype, self.cpu.dtype))

    def _comparable(self, rec: LineRecord, mine: VarRecord, theirs: VarRecord) -> bool:
        if not mine.head or len(mine.head) != len(theirs.head):
            return False
        if self.same_input and self.same_depth:
            return list(mine.shape) == list(theirs.shape)
        if rec.layer is None and not self.same_depth:
            return False
        return _token_prefix_holds(mine, theirs, self.device, self.cpu, self.shared_tokens)


def _token_prefix_holds(mine: VarRecord, theirs: VarRecord, device: TraceView, cpu: TraceView, shared: int) -> bool:
    """Whether the first values of both tensors belong to tokens of the shared prefix: the first axis is each
    run's token count, the other axes agree, and the values shown end before token `shared`."""
    a, b = list(mine.shape), list(theirs.shape)
    if len(a) != len(b) or not a or a[1:] != b[1:]:
        return False
    if a[0] != device.trace.meta["input"]["tokens"] or b[0] != cpu.trace.meta["input"]["tokens"]:
        return False
    per_token = math.prod(a[1:]) if len(a) > 1 else 1
    return per_token > 0 and math.ceil(len(mine.head) / per_token) <= shared


@dataclass(frozen=True)
class HeadComparison:
    """Device value vs CPU value of one tensor: over its first ``n`` values, max |Δ| (absolute, and in ulps
    of ``dtype``, the coarser of the two, at the tensor's largest magnitude) and ‖Δ‖₂ / ‖cpu‖₂; the norms'
    relative difference when compared."""

    n: int
    max_abs: float
    max_ulps: float | None     # None for integer tensors
    rel: float
    dtype: str
    norm_rel: float | None
    run_ulps: float | None = None   # in ulps of the runs' dtype too, when it is coarser than the tensors'
    run_dtype: str = ""

    def text(self) -> str:
        """`前 6 个值 first 6 values: max |Δ| 0.0039 = 1 ulp (bfloat16)，相对 rel 0.0021 · ‖·‖₂ 相对差 rel 1.9e-06`;
        a float32 value of a bfloat16 run adds `≈ 1.8 ulp (bfloat16, 运行的精度 the run's dtype)`."""
        ulps = f" = {num(self.max_ulps, 3)} ulp ({self.dtype})" if self.max_ulps is not None else ""
        if self.run_ulps is not None:
            ulps += f" ≈ {num(self.run_ulps, 2)} ulp ({self.run_dtype}，运行的精度 the run's dtype)"
        norm = f" · ‖·‖₂ 相对差 rel {num(self.norm_rel, 2)}" if self.norm_rel is not None else ""
        return (f"前 {self.n} 个值 first {self.n} values: max |Δ| {num(self.max_abs)}{ulps}，"
                f"相对 rel {num(self.rel, 2)}{norm}")


def coarser_name(a: str, b: str) -> str:
    """The dtype with fewer mantissa bits (its ulp is the one a comparison of the two can resolve)."""
    return min((a, b), key=lambda d: FLOAT_BITS.get(d, 99))


def ulp_at(magnitude: float, dtype: str) -> float:
    """The spacing of `dtype` floats at `magnitude` (at least the smallest normal's)."""
    bits = FLOAT_BITS[dtype]
    _, exponent = math.frexp(max(abs(magnitude), 2.0 ** -126))
    return 2.0 ** (exponent - 1 - bits)


def compare_values(mine: VarRecord, theirs: VarRecord, with_norm: bool, run_dtype: str = "") -> HeadComparison:
    """Distances between two tensors' first values (and norms when `with_norm`); a float32 tensor of a
    bfloat16 run (`run_dtype`) is measured in that coarser dtype's ulps as well, since its inputs were
    rounded to it."""
    a, b = [float(x) for x in mine.head], [float(x) for x in theirs.head]
    dtype = coarser_name(mine.dtype, theirs.dtype)
    diffs = [abs(x - y) for x, y in zip(a, b)]
    scale = max(abs(float(theirs.absmax or 0.0)), abs(float(mine.absmax or 0.0)), *(abs(x) for x in a + b))
    ulps = max(diffs, default=0.0) / ulp_at(scale, dtype) if dtype in FLOAT_BITS else None
    base = math.sqrt(sum(y * y for y in b))
    rel = math.sqrt(sum(d * d for d in diffs)) / base if base else (0.0 if not any(diffs) else math.inf)
    norm_rel = None
    if with_norm and theirs.norm:
        norm_rel = abs(float(mine.norm) - float(theirs.norm)) / abs(float(theirs.norm))
    run = coarser_name(dtype, run_dtype) if run_dtype in FLOAT_BITS and dtype in FLOAT_BITS else dtype
    run_ulps = max(diffs, default=0.0) / ulp_at(scale, run) if run != dtype else None
    return HeadComparison(len(a), max(diffs, default=0.0), ulps, rel, dtype, norm_rel, run_ulps, run if run_ulps is not None else "")


def _run_facts(view: TraceView) -> tuple[Any, ...]:
    meta = view.trace.meta
    config = {k: v for k, v in (meta["model"].get("config") or {}).items() if k not in _DEPTH_FIELDS}
    return (meta["model"].get("kind"), meta["model"]["name"], sorted(config.items(), key=str), meta.get("seed"))


def _shared_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    return n if list(a[:n]) == list(b[:n]) else 0


def find_cpu_peer(device: TraceView, views: Sequence[TraceView]) -> CpuPeer | None:
    """The CPU trace to compare a one-rank device trace with: same generated model and seed, ids of which one
    is a prefix of the other; the same dtype first, then identical ids, then the most layers shared."""
    if device.device == "cpu" or device.trace.tp > 1 or device.trace.meta["model"].get("kind") != "preset":
        return None
    ids = device.trace.meta["input"].get("ids") or []
    found = []
    for cpu in views:
        if cpu.device != "cpu" or cpu.trace.tp > 1 or cpu.pin_moved or _run_facts(cpu) != _run_facts(device):
            continue
        theirs = cpu.trace.meta["input"].get("ids") or []
        shared = _shared_prefix(ids, theirs)
        if not shared:
            continue
        depth = (len(device.trace.layers()), len(cpu.trace.layers()))
        found.append(((cpu.dtype != device.dtype, list(ids) != list(theirs), -min(depth)),
                      CpuPeer(device, cpu, shared, list(ids) == list(theirs), depth[0] == depth[1])))
    return min(found, key=lambda f: f[0])[1] if found else None
