"""An experiment's trace beside its baseline's: per line and layer the values, which identities hold.

Both traces are read as recorded (:func:`annotate.trace.format.store.read_payload`, records typed); the experiment's
lines are mapped back to the baseline's through its stored edits
(:func:`annotate.experiments.baseline_line`), so every row pairs the same statement, layer and call.
Identities are not assumed: a row's identities are the math variables the existing identification
(annotate/trace/identify/reference.py) matched in each trace; one *holds* in the experiment when the
experiment's tensor at that row was matched to the same variable. The verdict sentence is computed
from these rows only.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from annotate.experiments import baseline_line
from annotate.pages.base.tracefmt import NEAREST_BOUND, num, sup_label
from annotate.trace.identify.reference import MATH_VARS
from annotate.trace.format.schema import VarRecord
from annotate.trace.format.store import FLOW_FUNCTIONS, FLOW_NAMES, TENSORS_NAME, read_payload

#: flow variables plotted over layers (the two variables of the lesson)
PLOTTED = ("residual", "hidden_states")
#: float formats' mantissa bits: one ulp of a value a is 2**(floor(log2 a) - bits)
_MANTISSA = {"bfloat16": 7, "float16": 10, "float32": 23}


@dataclass(frozen=True)
class IdentityMiss:
    """What the experiment's identification said of a tensor whose baseline identity broke: its status, the
    nearest candidate (or the variable it now matches, `x1@0`) with its relative distance, and the
    tolerance that distance had to meet."""

    status: str
    nearest: str | None = None
    rel: float | None = None
    tolerance: float | None = None

    def past(self, key: str) -> float | None:
        """How many tolerances away the tensor is when `key` ("x1@0") is still its nearest (1.7: 70 % past)."""
        if self.status != "no match" or self.nearest != key or self.rel is None or not self.tolerance:
            return None
        return self.rel / self.tolerance


@dataclass(frozen=True)
class ComparedRow:
    """One variable after one traced line in one layer and call, in both runs."""

    function: str
    file: str
    line: int  # the baseline's line (the experiment's line mapped back through the edits)
    layer: int | None
    hit: int
    var: str
    base_norm: float
    exp_norm: float | None  # None: the experiment did not record this row (the edit removed the line)
    ulps: float | None  # max |Δ| in ulps at the baseline tensor's largest value (None: not comparable)
    base_ids: tuple[str, ...]  # keys "x1@0" the baseline's tensor was identified as
    exp_ids: tuple[str, ...]
    exp_miss: IdentityMiss | None = None  # the experiment's identification where it matched nothing

    @property
    def flow(self) -> bool:
        return self.function in FLOW_FUNCTIONS and self.var in FLOW_NAMES

    @property
    def held(self) -> tuple[str, ...]:
        return tuple(k for k in self.base_ids if k in self.exp_ids)

    @property
    def broke(self) -> tuple[str, ...]:
        return tuple(k for k in self.base_ids if k not in self.exp_ids)

    @property
    def gained(self) -> tuple[str, ...]:
        """Identities the experiment's tensor has that the baseline's had not (e.g. aliasing fixed)."""
        return tuple(k for k in self.exp_ids if k not in self.base_ids)


@dataclass(frozen=True)
class Fate:
    """One identity family (x₁ over all layers): in which layers it held and broke in the experiment."""

    key: str
    held: tuple[int, ...]
    broke: tuple[int, ...]
    gained: tuple[int, ...] = ()  # layers where only the experiment's flow matched it

    @property
    def label(self) -> str:
        return MATH_VARS[self.key].label.format(l="ℓ") if self.key in MATH_VARS else self.key


@dataclass
class ExperimentComparison:
    """Everything the experiment page shows, computed from the two traces."""

    experiment: dict[str, Any]
    baseline_key: str
    dtype: str
    rows: list[ComparedRow]
    fates: list[Fate]
    norms: dict[str, tuple[list[float], list[float]]] = field(default_factory=dict)  # var -> (base, exp) per layer
    final: tuple[dict[str, Any], dict[str, Any]] = ({}, {})  # final output vs HF: baseline, experiment

    @property
    def max_ulps(self) -> float | None:
        values = [r.ulps for r in self.rows if r.ulps is not None]
        return max(values) if values else None

    def verdict(self) -> tuple[str, str]:
        """(zh, en): the flow is unchanged, or which identity broke first and from which layer, and which the
        experiment restored; then the final output's distance to HF, baseline → experiment."""
        broken = [f for f in self.fates if f.broke]
        gained = [f for f in self.fates if f.gained]
        zh, en = [], []
        if not broken and not gained:
            worst = self.max_ulps
            size = f"max {worst:.0f} ulp" if worst is not None else "no tensors to compare"
            zh.append(f"数据流不变：每个恒等式都成立（{len(self.fates)} 个），{size}。")
            en.append(f"The flow is unchanged: every identity holds ({len(self.fates)}), {size}.")
        if gained:
            names = ", ".join(f.label for f in gained)
            zh.append(f"恒等式恢复：{names}（基线中没有成立）。")
            en.append(f"Identities restored: {names} (not holding in the baseline).")
        if broken:
            first = min(broken, key=lambda f: (min(f.broke), _rank(f.key)))
            how = [self.break_words(f.key, min(f.broke)) for f in broken]
            names_zh = "；".join(f"{f.label}（{w[0]}）" for f, w in zip(broken, how))
            names_en = "; ".join(f"{f.label} ({w[1]})" for f, w in zip(broken, how))
            zh.append(f"{first.label} 从第 {min(first.broke)} 层起不再成立；不再成立的恒等式：{names_zh}。")
            en.append(f"{first.label} no longer holds from layer {min(first.broke)} on; broken: {names_en}.")
        base, exp = (f.get("rel") for f in self.final)
        if isinstance(base, (int, float)) and isinstance(exp, (int, float)):
            zh.append(f"最终输出与 HF 的相对距离 {base:.2g} → {exp:.2g}。")
            en.append(f"Final output vs HF (rel L2): {base:.2g} → {exp:.2g}.")
        return " ".join(zh), " ".join(en)

    def miss(self, key: str, layer: int) -> IdentityMiss | None:
        """The experiment's identification of the flow tensor that broke `key` in `layer`: the one closest to
        still holding it (smallest multiple of the tolerance), else the first such row's."""
        ident = f"{key}@{layer}"
        found = [r.exp_miss for r in self.rows if r.flow and ident in r.broke and r.exp_miss is not None]
        found.sort(key=lambda m: m.status == "match")   # a row that matched nothing says more than one that matched another
        near = [m for m in found if m.past(ident) is not None]
        return min(near, key=lambda m: m.past(ident) or 0.0) if near else (found[0] if found else None)

    def break_words(self, key: str, layer: int) -> tuple[str, str]:
        """(zh, en): how far past the tolerance the break of `key` in `layer` is, e.g. "第 0 层：最近的仍是它，
        相对差 0.104，是容差 0.0625 的 1.7 倍"; a break whose nearest is now another variable says which."""
        m = self.miss(key, layer)
        ident = f"{key}@{layer}"
        if m is None:
            return f"第 {layer} 层", f"layer {layer}"
        times = m.past(ident)
        if times is not None:
            return (f"第 {layer} 层：最近的仍是它，相对差 {num(m.rel, 3)}，是容差 {num(m.tolerance, 3)} 的 {times:.1f} 倍",
                    f"layer {layer}: still the nearest, rel {num(m.rel, 3)} = {times:.1f}× the tolerance {num(m.tolerance, 3)}")
        if m.status == "match" and m.nearest:
            return f"第 {layer} 层：现在等于 {_label(m.nearest)}", f"layer {layer}: now equals {_label(m.nearest)}"
        if m.status == "ambiguous":
            return f"第 {layer} 层：含糊，不止一个候选", f"layer {layer}: ambiguous, more than one candidate"
        if m.nearest and m.rel is not None and m.rel <= NEAREST_BOUND:
            other = _label(m.nearest)
            return (f"第 {layer} 层：最近的变成了 {other}，相对差 {num(m.rel, 3)}",
                    f"layer {layer}: the nearest is now {other}, rel {num(m.rel, 3)}")
        return f"第 {layer} 层：没有任何候选在 {NEAREST_BOUND} 以内", f"layer {layer}: no candidate within rel {NEAREST_BOUND}"


def _label(ident: str) -> str:
    """`x1@0` -> `x₁⁽⁰⁾` (the site's one superscript notation)."""
    key, layer = _split(ident)
    return sup_label(MATH_VARS[key].label.format(l=layer)) if key in MATH_VARS else ident


def _rank(key: str) -> int:
    """Position of a math variable in the block's order (x, RMSNorm₁, Attn, x₁, …)."""
    order = list(MATH_VARS)
    return order.index(key) if key in order else len(order)


def compare_traces(baseline: Path, experiment: Path,
                   read: Callable[[Path], dict[str, Any]] = read_payload) -> ExperimentComparison:
    """Compare the experiment trace folder with its baseline trace folder. ``read``: how a trace's payload is
    read (the site's build reads each once, however many experiments share a baseline: `experiment_pages`)."""
    base, exp = read(baseline), read(experiment)
    block = exp.get("experiment") or {}
    edits = block.get("edits", [])
    tensors = _Tensors(baseline, experiment)
    exp_rows = {}
    for rec in exp["records"]:
        line = baseline_line(edits, rec.file, rec.line)
        for var in rec.vars:
            exp_rows[(rec.function, rec.file, line, rec.layer, rec.module, rec.call, rec.hit, var.name)] = var
    rows = []
    dtype = str(base["meta"]["dtype"])
    for rec in base["records"]:
        for var in rec.vars:
            other = exp_rows.get((rec.function, rec.file, rec.line, rec.layer, rec.module, rec.call, rec.hit, var.name))
            rows.append(ComparedRow(rec.function, rec.file, rec.line, rec.layer, rec.hit, var.name,
                                    float(var.norm), None if other is None else float(other.norm),
                                    None if other is None else tensors.ulps(var, other, dtype),
                                    _ids(var), _ids(other) if other is not None else (), _miss(other)))
    return ExperimentComparison(block, baseline.name, dtype, rows, fates(rows), _norms(rows, int(base["meta"]["model"]["layers"])),
                      (base["summary"].get("final_vs_hf", {}), exp["summary"].get("final_vs_hf", {})))


def _ids(var: VarRecord) -> tuple[str, ...]:
    identity = var.identity
    if identity.get("status") != "match":
        return ()
    return tuple(f"{m['key']}@{m['layer']}" for m in identity.get("matches", []))


def _miss(var: VarRecord | None) -> IdentityMiss | None:
    """The experiment's identification of a tensor (None for an unrecorded row): for a match, the variable
    it now equals; otherwise its nearest candidate."""
    if var is None:
        return None
    identity = var.identity
    matches = identity.get("matches") or []
    near: dict[str, Any] = dict((matches[0] if identity.get("status") == "match" and matches
                                 else identity.get("nearest")) or {})
    nearest = f"{near['key']}@{near['layer']}" if near.get("key") is not None and near.get("layer") is not None else None
    rel, tol = near.get("rel"), identity.get("tolerance")
    return IdentityMiss(str(identity.get("status")), nearest, float(rel) if isinstance(rel, (int, float)) else None,
                        float(tol) if isinstance(tol, (int, float)) else None)


def fates(rows: list[ComparedRow]) -> list[Fate]:
    """Per math variable and layer: held when some flow row (hidden_states / residual of the decoder or model
    forward) matched it in both runs, broke when only in the baseline, gained when only in the experiment."""
    base: set[tuple[str, int]] = set()
    exp: set[tuple[str, int]] = set()
    for row in (r for r in rows if r.flow):
        base.update(_split(i) for i in row.base_ids)
        exp.update(_split(i) for i in row.exp_ids)
    keys = sorted({k for k, _ in base | exp}, key=_rank)

    def layers(found: set[tuple[str, int]], key: str) -> tuple[int, ...]:
        return tuple(sorted(n for k, n in found if k == key))
    return [Fate(k, layers(base & exp, k), layers(base - exp, k), layers(exp - base, k)) for k in keys]


def _split(ident: str) -> tuple[str, int]:
    key, layer = ident.split("@")
    return key, int(layer)


def _norms(rows: list[ComparedRow], layers: int) -> dict[str, tuple[list[float], list[float]]]:
    """‖var‖ on leaving each decoder layer (its last traced line), baseline and experiment."""
    out: dict[str, tuple[list[float], list[float]]] = {}
    for name in PLOTTED:
        base, exp = [math.nan] * layers, [math.nan] * layers
        for r in rows:
            if r.function == "Qwen3DecoderLayer.forward" and r.var == name and r.layer is not None and r.layer < layers:
                base[r.layer] = r.base_norm
                exp[r.layer] = r.exp_norm if r.exp_norm is not None else math.nan
        out[name] = (base, exp)
    return out


class _Tensors:
    """Saved tensors of both traces (when both kept them): max |Δ| in ulps of the baseline's scale."""

    def __init__(self, baseline: Path, experiment: Path) -> None:
        self.files = [p / TENSORS_NAME for p in (baseline, experiment)]
        self.handles: list[Any] | None = None

    def ulps(self, base: VarRecord, exp: VarRecord, dtype: str) -> float | None:
        if not base.tensor or not exp.tensor or not all(f.is_file() for f in self.files):
            return None
        if self.handles is None:
            from safetensors import safe_open

            self.handles = [safe_open(str(f), "pt", "cpu") for f in self.files]
        try:
            a, b = (h.get_tensor(k).float() for h, k in zip(self.handles, (base.tensor, exp.tensor)))
        except Exception:  # a key one file lacks: not comparable, said as such on the page
            return None
        if a.shape != b.shape or not a.is_floating_point():
            return None
        scale = float(a.abs().max()) if a.numel() else 0.0
        if scale == 0.0 or not math.isfinite(scale):
            return 0.0 if bool((a == b).all()) else None
        ulp = 2.0 ** (math.floor(math.log2(scale)) - _MANTISSA.get(dtype, 23))
        return float((a - b).abs().max()) / ulp
