"""Identification of a --tp run, rank by rank, by comparison with HF transformers and with --tp 1.

nano-vllm splits each projection across N ranks: QKVParallelLinear takes heads h·r/N…, the
MergedColumnParallelLinear F columns F·r/N…, RowParallelLinear multiplies its input slice by the
matching columns of W and `all_reduce`s the partial sums, VocabParallelEmbedding looks up the ids of
its vocabulary slice and `all_reduce`s. Nothing of that is assumed here: every shard a rank recorded
is compared with *every* rank's slice of HF's tensor (captured with forward hooks on HF's own
modules), and the slice it matches is reported; every partial sum is compared with the
recomputation from HF's slices (the slice of HF's input times the slice of HF's weight); Σ_r partial
is compared with HF's attention / MLP increment (and x⁽⁰⁾ for the embedding); every tensor recorded
after an `all_reduce` is compared with the same variable of a `--tp 1` run, with max |Δ| in ulps
(the sum's order changes the rounding).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

import torch

from annotate.trace.model.numerics import distance
from annotate.trace.record.recorder import PARALLEL_FORWARDS, RawRecord
from annotate.trace.identify.reference import MARGIN, TOLERANCE, PeerRun, separation

ALL_REDUCE = "all_reduce("
#: HF Qwen3 modules whose output (or input, for o_proj / down_proj) a shard is a slice of
_HF_OUT = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "mlp.gate_proj", "mlp.up_proj")
_HF_IN = ("self_attn.o_proj", "mlp.down_proj")


@dataclass(frozen=True)
class Shape:
    """The sizes a --tp run splits, from the config."""

    tp: int
    heads: int
    kv_heads: int
    head_dim: int
    inter: int
    vocab: int

    @classmethod
    def of(cls, config: dict[str, Any], tp: int) -> Shape:
        heads = int(config["num_attention_heads"])
        head_dim = int(config.get("head_dim") or int(config["hidden_size"]) // heads)
        return cls(tp, heads, int(config["num_key_value_heads"]), head_dim, int(config["intermediate_size"]),
                   int(config["vocab_size"]))

    def span(self, what: str, rank: int) -> tuple[int, int]:
        """[start, end) of rank's slice of `what` (heads, kv_heads, inter, vocab) in elements."""
        per = getattr(self, what) // self.tp
        unit = self.head_dim if what in ("heads", "kv_heads") else 1
        return rank * per * unit, (rank + 1) * per * unit


@dataclass
class HFInner:
    """HF's per-layer projections (outputs of q/k/v/gate/up, inputs of o/down), its weights of
    o_proj / down_proj and the embedding."""

    values: dict[tuple[str, int], torch.Tensor]
    weights: dict[str, torch.Tensor]


def hf_inner(checkpoint: Path, layers: int, dtype: torch.dtype, input_ids: torch.Tensor) -> HFInner:
    """Run HF's Qwen3 (eager, CPU) on the checkpoint with hooks on its projections."""
    import transformers
    from transformers import Qwen3ForCausalLM

    transformers.logging.set_verbosity_error()
    model = Qwen3ForCausalLM.from_pretrained(str(checkpoint), torch_dtype=dtype, num_hidden_layers=layers,
                                             attn_implementation="eager").eval()
    values: dict[tuple[str, int], torch.Tensor] = {}
    handles = []
    for i, layer in enumerate(model.model.layers):
        for name in _HF_OUT:
            mod = layer.get_submodule(name)
            handles.append(mod.register_forward_hook(lambda m, a, o, i=i, n=name: values.__setitem__((n, i), o[0].clone())))
        for name in _HF_IN:
            mod = layer.get_submodule(name)
            handles.append(mod.register_forward_pre_hook(lambda m, a, i=i, n=name: values.__setitem__((n, i), a[0][0].clone())))
    try:
        with torch.inference_mode():
            ids = input_ids.cpu()[None]
            model.model(input_ids=ids, position_ids=torch.arange(ids.shape[1])[None], use_cache=False)
    finally:
        for h in handles:
            h.remove()
    weights = {k: v.detach().clone() for k, v in model.state_dict().items()
               if k.endswith(("o_proj.weight", "down_proj.weight", "embed_tokens.weight"))}
    return HFInner(values, weights)


# ---------------------------------------------------------------- finding recorded values

def _find(records: list[RawRecord], function: str, module: str, name: str,
          pick: Callable[[RawRecord, torch.Tensor], bool] = lambda r, t: True) -> torch.Tensor | None:
    """The first recorded value of `name` in `function` of `module` (traced, a line) that `pick` accepts."""
    for r in records:
        if r.function == function and r.module == module and r.kind == "line" and r.source == "traced":
            for v in r.vars:
                if v.name == name and pick(r, v.tensor):
                    return v.tensor
    return None


def partial_and_full(records: list[RawRecord], module: str) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """`y` of a tensor-parallel forward of `module`: the last value before its `all_reduce` line
    (the partial sum) and the value after it (the full sum)."""
    partial = full = None
    for r in records:
        if r.function in PARALLEL_FORWARDS and r.module == module and r.kind == "line" and r.source == "traced":
            y = next((v.tensor for v in r.vars if v.name == "y"), None)
            if y is None:
                continue
            if ALL_REDUCE in r.text:
                full = y
                break
            partial = y
    return partial, full


RecordKey = tuple[str, "str | None", "int | None", int, int, int, str]


def _key(r: RawRecord, name: str) -> RecordKey:
    """Where a value was recorded: function, module, layer, call, line, hit, variable."""
    return (r.function, r.module, r.layer, r.call, r.line, r.hit, name)


def post_reduce(records: list[RawRecord]) -> list[tuple[RecordKey, torch.Tensor]]:
    """Every (record key, tensor) recorded after an all_reduce: the parallel forwards' `y` after the
    reduce, and every float tensor of the decoder / model forwards (they hold full sums only)."""
    out = []
    for r in records:
        if r.kind != "line" or r.source != "traced":
            continue
        if r.function in PARALLEL_FORWARDS:
            if ALL_REDUCE in r.text:
                out += [(_key(r, v.name), v.tensor) for v in r.vars if v.name == "y"]
        elif r.function in ("Qwen3DecoderLayer.forward", "Qwen3Model.forward"):
            out += [(_key(r, v.name), v.tensor) for v in r.vars if v.tensor.is_floating_point()]
    return out


# ---------------------------------------------------------------- comparisons

def _tolerance(t: torch.Tensor) -> float:
    return TOLERANCE.get(str(t.dtype).removeprefix("torch."), TOLERANCE["float32"])


def _against(value: torch.Tensor, expected: torch.Tensor) -> dict[str, Any]:
    d = distance(value, expected.to(value.dtype))
    return {"max_abs": d.max_abs, "scale_ulps": d.scale_ulps, "rel": d.rel, "within": d.rel <= _tolerance(value)}


def identify_slice(value: torch.Tensor, candidates: list[torch.Tensor]) -> dict[str, Any]:
    """Which candidate (one per rank's slice) `value` equals, by the same rule as every other identity
    (annotate/trace/identify/reference.py): the nearest by relative L2 within tolerance, and the runner-up
    (the nearest other slice) at least MARGIN times as far; `slice` is None otherwise, and
    `ambiguous` lists the slices that cannot be told apart. `margin` is that ratio (None: one slice)."""
    dists = [_against(value, c) if tuple(c.shape) == tuple(value.shape) else None for c in candidates]
    order = sorted((d["rel"], i) for i, d in enumerate(dists) if d is not None)
    tol = _tolerance(value)
    margin = separation(order[0][0], order[1][0], tol) if len(order) > 1 else None
    found: dict[str, Any] = {"slice": None, "distances": dists, "margin": margin, "required": MARGIN}
    if order and order[0][0] <= tol:
        if margin is None or margin >= MARGIN:
            found["slice"] = order[0][1]
        else:
            found["ambiguous"] = [i for rel, i in order if rel <= max(tol, MARGIN * order[0][0])]
    return found


def _qkv_slices(hf: HFInner, s: Shape, layer: int) -> list[torch.Tensor]:
    q, k, v = (hf.values[(n, layer)] for n in _HF_OUT[:3])
    out = []
    for r in range(s.tp):
        (a, b), (c, d) = s.span("heads", r), s.span("kv_heads", r)
        out.append(torch.cat([q[:, a:b], k[:, c:d], v[:, c:d]], dim=-1))
    return out


def _gate_up_slices(hf: HFInner, s: Shape, layer: int) -> list[torch.Tensor]:
    g, u = hf.values[("mlp.gate_proj", layer)], hf.values[("mlp.up_proj", layer)]
    return [torch.cat([g[:, a:b], u[:, a:b]], dim=-1) for a, b in (s.span("inter", r) for r in range(s.tp))]


def _row_partials(hf: HFInner, s: Shape, layer: int, name: str, what: str) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """HF's input slices of a row-parallel projection and the partial sums recomputed from them
    (input slice · weight columns ᵀ, in fp32, rounded to the run's dtype)."""
    x, w = hf.values[(name, layer)], hf.weights[f"model.layers.{layer}.{name}.weight"]
    ins, partials = [], []
    for r in range(s.tp):
        a, b = s.span(what, r)
        ins.append(x[:, a:b])
        partials.append((x[:, a:b].float() @ w[:, a:b].float().T).to(x.dtype))
    return ins, partials


def _embed_partials(hf: HFInner, s: Shape, ids: torch.Tensor) -> list[torch.Tensor]:
    """Each rank's embedding partial from HF's table: the rows of its vocabulary slice, 0 elsewhere."""
    w = hf.weights["model.embed_tokens.weight"]
    out = []
    for r in range(s.tp):
        a, b = s.span("vocab", r)
        mask = (ids >= a) & (ids < b)
        out.append(w[ids.clamp(0, w.shape[0] - 1)] * mask[:, None].to(w.dtype))
    return out


def _shard(rank: int, layer: int | None, what: str, where: tuple[str, str, str], value: torch.Tensor | None,
           slices: list[torch.Tensor], s: Shape, kind: str) -> dict[str, Any] | None:
    """One shard's identification, and where it was recorded (function, module, variable) with its
    slice in the split dimension's own units (head, F column, token id), for pages to label."""
    if value is None:
        return None
    found = identify_slice(value.reshape(value.shape[0], -1), slices)
    per = getattr(s, kind) // s.tp
    function, module, var = where
    return {"rank": rank, "layer": layer, "what": what, "function": function, "module": module, "var": var,
            "shape": list(value.shape), "slice": found["slice"], "expected_slice": rank, "split": kind,
            "margin": found["margin"], "required": found["required"], "ambiguous": found.get("ambiguous", []),
            "first": rank * per, "last": (rank + 1) * per - 1, "distances": found["distances"]}


def rank_shards(rank: int, records: list[RawRecord], hf: HFInner, s: Shape, layers: int,
                ids: torch.Tensor) -> list[dict[str, Any]]:
    """Every shard and partial sum of one rank, each identified against all ranks' slices of HF."""
    out: list[dict[str, Any] | None] = []
    per = s.inter // s.tp

    def act(r: RawRecord, t: torch.Tensor) -> bool:   # Qwen3MLP's `x` after act_fn: F/N wide
        return t.shape[-1] == per

    for n in range(layers):
        attn, mlp = f"model.layers.{n}.self_attn", f"model.layers.{n}.mlp"
        at, ml, row = "Qwen3Attention.forward", "Qwen3MLP.forward", "RowParallelLinear.forward"
        o_in, o_part = _row_partials(hf, s, n, "self_attn.o_proj", "heads")
        d_in, d_part = _row_partials(hf, s, n, "mlp.down_proj", "inter")
        out += [
            _shard(rank, n, "qkv", (at, attn, "qkv"), _find(records, at, attn, "qkv"), _qkv_slices(hf, s, n), s, "heads"),
            _shard(rank, n, "o", (at, attn, "o"), _find(records, at, attn, "o"), o_in, s, "heads"),
            _shard(rank, n, "o_proj partial", (row, f"{attn}.o_proj", "y"),
                   partial_and_full(records, f"{attn}.o_proj")[0], o_part, s, "heads"),
            _shard(rank, n, "gate_up", (ml, mlp, "gate_up"), _find(records, ml, mlp, "gate_up"),
                   _gate_up_slices(hf, s, n), s, "inter"),
            _shard(rank, n, "act", (ml, mlp, "x"), _find(records, ml, mlp, "x", act), d_in, s, "inter"),
            _shard(rank, n, "down_proj partial", (row, f"{mlp}.down_proj", "y"),
                   partial_and_full(records, f"{mlp}.down_proj")[0], d_part, s, "inter")]
    out.append(_shard(rank, None, "embed partial", ("VocabParallelEmbedding.forward", "model.embed_tokens", "y"),
                      partial_and_full(records, "model.embed_tokens")[0], _embed_partials(hf, s, ids), s, "vocab"))
    return [x for x in out if x is not None]


def sums(ranks: list[list[RawRecord]], ref: PeerRun, layers: int) -> list[dict[str, Any]]:
    """Σ_r partial sum ≡ the peer's increment: o_proj → Attn(·), down_proj → MLP(·), embedding → x⁽⁰⁾."""
    out = []
    places = [(f"model.layers.{n}.self_attn.o_proj", "attn", n) for n in range(layers)] + \
             [(f"model.layers.{n}.mlp.down_proj", "mlp", n) for n in range(layers)] + [("model.embed_tokens", "x", 0)]
    for module, key, layer in places:
        parts = [partial_and_full(recs, module)[0] for recs in ranks]
        if any(p is None for p in parts):
            continue
        total = torch.stack([p.float() for p in parts if p is not None]).sum(0).to(parts[0].dtype)  # type: ignore[union-attr]
        out.append({"module": module, "layer": layer, "peer": key, **_against(total, ref.get(key, layer))})
    return out


def versus_tp1(records: list[RawRecord], tp1: list[RawRecord]) -> list[dict[str, Any]]:
    """Every post-all_reduce tensor of rank 0 against the same variable of the --tp 1 run.

    In the --tp 1 run the parallel forwards skip their all_reduce, so their `y` is taken from their
    `return` line (the full product); decoder / model lines are matched by function, module, line,
    layer, call, hit and name. ``scale_ulps`` (max |Δ| in ulps of the largest magnitude) is the
    measure of "how much": element-wise ulps near zero count sign flips of tiny values."""
    one = dict(post_reduce(tp1))
    reduced = {r.module: v.tensor for r in tp1 if r.function in PARALLEL_FORWARDS and r.kind == "line"
               and r.source == "traced" and r.text.startswith("return") for v in r.vars if v.name == "y"}
    out = []
    for key, t in post_reduce(records):
        function, module, layer, _, line, hit, name = key
        other = reduced.get(module) if function in PARALLEL_FORWARDS else one.get(key)
        if other is None or tuple(other.shape) != tuple(t.shape):
            continue
        d = distance(t, other)
        out.append({"function": function, "module": module, "layer": layer, "line": line, "hit": hit, "name": name,
                    **asdict(d), "within": d.rel <= _tolerance(t)})
    return out


def bytes_per_token(config: dict[str, Any], dtype_bytes: int, tp: int) -> dict[str, Any]:
    """What the all_reduces move per token, from the config: each one reduces an H-vector; a ring
    all_reduce sends 2·(N−1)/N of it per rank. Two per decoder layer (o_proj, down_proj), one for the
    embedding."""
    hidden, layers = int(config["hidden_size"]), int(config["num_hidden_layers"])
    vector = hidden * dtype_bytes
    return {"per_all_reduce": vector, "all_reduces": 2 * layers + 1, "per_layer": 2 * vector,
            "ring_per_rank_per_all_reduce": 2 * (tp - 1) * vector / tp}
