"""Diagram numbers read from a recorded trace and re-run through the vendored code (``traced.*``).

The trace used is the first bf16/fp16 trace under ``traces/`` that saved full tensors, the default
``traces/cpu`` first (a trace of summaries only cannot show one token's channels). Read through
:func:`annotate.trace.format.store.load_trace`, using records' tensors, variables and meta only.

For the first norm of layer ``LAYER`` (``input_layernorm``, the fused ``add_rms_forward``):

- the recorded arguments (hidden_states, residual) are run again through the vendored
  ``RMSNorm.add_rms_forward`` with the checkpoint's γ (regenerated from the preset and seed the
  trace names); the claim fails unless that reproduces the recorded outputs bit for bit;
- the rounded variant (HF's order) is the vendored ``RMSNorm.rms_forward`` on the rounded residual;
  the ulps between the two outputs are counted over the whole call;
- one token (the one where the two orders differ in most channels) is kept for the page: its sum
  x, x², the mean of squares (the local ``var``), RMS, γ and both outputs, for the ``TOP`` channels
  of largest |x| and for the channels where the orders differ.

Counterexample "hidden_states is x₂": the returned pair of layer ``LAYER`` against the trace's x₂ of
that layer (the HF peer's tensor), with the identities the trace found.

When no such trace exists, ``traced.available`` is False and ``traced.missing`` says why.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from annotate.lesson.capture import locals_at_return
from annotate.lesson.model import Family
from annotate.lesson.rmsnorm import vendored_norm
from annotate.project import Project
from annotate.trace.model.options import TRACE_DEFAULTS
from annotate.trace.format.store import ADD_RMS

LAYER_FN = "Qwen3DecoderLayer.forward"
LAYER = 1
TOP = 8
DEFAULT_TRACE = TRACE_DEFAULTS.device  # `annotate trace` writes its default trace to traces/<device>: traces/cpu


def pick_trace(root: Path) -> tuple[Any | None, str]:
    """(the trace to draw, '') or (None, why none fits)."""
    from annotate.trace.format.store import TENSORS_NAME, find_traces, load_trace

    found = find_traces(root)
    found.sort(key=lambda p: p.name != DEFAULT_TRACE)
    for path in found:
        trace = load_trace(path)
        if trace.meta.get("dtype") in ("bfloat16", "float16") and (path / TENSORS_NAME).is_file() \
                and int(trace.meta["model"]["layers"]) > LAYER and trace.meta["model"].get("kind") == "preset":
            return trace, ""
    return None, (f"no bf16 trace with saved tensors of a preset model with more than {LAYER} layers under "
                  f"{root / Project.TRACES_DIR} (found: {', '.join(p.name for p in found) or 'none'})")


def _call(trace: Any, layer: int) -> dict[str, Any]:
    """Tensor keys of one add_rms_forward call: its arguments, the fp32 sum and its returns."""
    recs = [r for r in trace.records if r.function == ADD_RMS and r.layer == layer
            and (r.module or "").endswith("input_layernorm") and r.call == 0]
    entry = next(r for r in recs if r.kind == "entry")
    ret = next(r for r in recs if r.var("return[0]") is not None)
    stmts = (trace.function(ADD_RMS) or {}).get("statements", [])
    rnd = next(s["line"] for s in stmts if "residual" in s["targets"])
    sum_line = max(s["line"] for s in stmts if s["line"] < rnd and "x" in s["targets"])
    summed = next(r for r in recs if r.kind == "line" and r.line == sum_line)
    return {"module": entry.module, "hidden": entry.var("x").tensor, "residual": entry.var("residual").tensor,
            "sum": summed.var("x").tensor, "out": ret.var("return[0]").tensor, "res": ret.var("return[1]").tensor}


def _gamma(trace: Any, module: str) -> Any:
    """γ of ``module``: the checkpoint's weights regenerated from the preset config and seed."""
    from annotate.trace.model.runtime import trace_weights

    weights = trace_weights(trace.meta, trace.path)
    assert weights is not None   # pick_trace takes preset traces only
    return weights[module + ".weight"]


def _ulps(a: Any, b: Any) -> Any:
    from annotate.trace.model.numerics import ordered_bits

    return (ordered_bits(a) - ordered_bits(b)).abs()


def _row(t: Any) -> list[float]:
    return [float(v) for v in t.reshape(-1)]


def _fused(fam: Family, mods: dict[str, Any], trace: Any) -> None:
    """``traced.norm.*`` and ``traced.order.*`` (see the module docstring)."""
    import torch

    keys = _call(trace, LAYER)
    t = {k: trace.tensor(v) for k, v in keys.items() if k != "module"}
    eps = float(trace.meta["model"]["config"].get("rms_norm_eps", 1e-6))
    gamma = _gamma(trace, keys["module"])
    norm, cls = vendored_norm(mods["layernorm"], gamma, eps), mods["layernorm"].RMSNorm
    with torch.no_grad(), locals_at_return(cls.add_rms_forward) as seen:
        out, res = norm(t["hidden"].clone(), t["residual"].clone())
    var = seen.get(cls.add_rms_forward.__qualname__, {}).get("var")
    if var is None:
        raise LookupError("RMSNorm.add_rms_forward no longer has a local `var` (the mean of squares)")
    with torch.no_grad():
        out_hf = norm(res.clone())  # HF's order: normalise the rounded residual (vendored rms_forward)
    same = torch.equal(out, t["out"]) and torch.equal(res, t["res"])
    ulps = _ulps(out, out_hf)
    per_token = (ulps > 0).sum(dim=-1)
    tok = int(per_token.argmax())
    x = t["sum"][tok].float()
    top = sorted(range(x.numel()), key=lambda i: (-abs(float(x[i])), i))[:TOP]
    differ = [i for i in range(x.numel()) if int(ulps[tok, i]) > 0][:TOP]
    fam.add("norm.trace", trace.path.name, "the trace the diagram reads (folder under traces/)")
    fam.add("norm.provenance", trace.provenance(), "device, dtype, model, sizes of that trace")
    fam.add("norm.layer", LAYER, "decoder layer ℓ of the call drawn")
    fam.add("norm.module", keys["module"], "the RMSNorm module drawn")
    fam.add("norm.hidden_size", x.numel(), "H of the trace")
    fam.add("norm.tokens", int(out.shape[0]), "tokens in the call")
    fam.add("norm.token", tok, "the token drawn (most channels where the two orders differ)")
    fam.add("norm.eps", eps, "ε of the model config")
    fam.add("norm.channels", top, f"the {TOP} channels of largest |x| of that token")
    fam.add("norm.x", _row(x), "x = hidden + residual in float32 (recorded sum), whole token row")
    fam.add("norm.sum_sq", float((x * x).sum()), "Σᵢ xᵢ² of that token")
    fam.add("norm.mean_sq", float(var[tok].reshape(-1)[0]), "mean of squares: the local `var` of add_rms_forward")
    fam.add("norm.rms", math.sqrt(float(var[tok].reshape(-1)[0]) + eps), "√(var + ε)")
    fam.add("norm.gamma", _row(gamma.float()), "γ of that norm (the checkpoint's weight)")
    fam.add("norm.output", _row(out[tok].float()), "output of the vendored add_rms_forward, that token",
            None if same else "re-running the vendored add_rms_forward on the recorded arguments no longer "
            f"reproduces the outputs {keys['out']}, {keys['res']} recorded in {trace.path}: the vendored code "
            "or the trace changed; re-trace (`make trace`) and check the diagram")
    fam.add("order.residual", _row(res[tok].float()), "the rounded residual returned (bf16), that token")
    fam.add("order.output_hf", _row(out_hf[tok].float()), "the vendored rms_forward on the rounded residual (HF's order)")
    fam.add("order.ulps", [int(u) for u in ulps[tok]], "ulps between the two orders, that token")
    fam.add("order.differ", differ, f"up to {TOP} channels of that token where the orders differ")
    n_diff = int((ulps > 0).sum())
    fam.add("order.n_diff", n_diff, "elements of the call where the two orders differ",
            None if n_diff else f"normalising the rounded residual now gives the same output as the unrounded sum "
            f"in {trace.path} (no element differs): counterexample 4 shows nothing; reword it")
    fam.add("order.max_ulps", int(ulps.max()), "largest difference in ulps over the call")
    fam.add("order.numel", int(ulps.numel()), "elements of the call")
    fam.add("order.token_diff", int(per_token[tok]), "channels of the drawn token that differ")


def _matches(var: Any, key: str, layer: int) -> dict[str, Any] | None:
    if var.identity.get("status") != "match":   # an ambiguous identity names candidates, not a ≡
        return None
    return next((m for m in var.identity.get("matches") or [] if m["key"] == key and m["layer"] == layer), None)


def returned(fam: Family, trace: Any) -> None:
    """``traced.x2.*``: the layer's returned hidden_states read as x₂, against the trace's x₂."""
    import torch

    ret = next(r for r in trace.records if r.function == LAYER_FN and r.layer == LAYER and r.var("return[0]"))
    h_var, r_var = ret.var("return[0]"), ret.var("return[1]")
    peer = next(m for m in trace.math if m["key"] == "x2" and m["layer"] == LAYER)
    h, r, x2 = trace.tensor(h_var.tensor), trace.tensor(r_var.tensor), trace.tensor(peer["tensor"])
    added = (h.float() + r.float()).to(h.dtype)  # the sum nano-vllm's next norm forms, rounded

    def rel(a: Any) -> float:
        return float(torch.linalg.vector_norm(a.float() - x2.float()) / torch.linalg.vector_norm(x2.float()))

    tol = float(h_var.identity.get("tolerance", 2.0 ** -4))
    wrong, right = rel(h), rel(added)
    found = next(((rec, v) for rec in trace.records for v in rec.vars if _matches(v, "x2", LAYER)), None)
    tok = 0
    chans = sorted(range(x2.shape[-1]), key=lambda i: (-abs(float(x2[tok, i])), i))[:4]
    fam.add("x2.layer", LAYER, "layer ℓ whose return is read")
    fam.add("x2.tolerance", tol, "relative-L2 tolerance the trace identifies variables with")
    fam.add("x2.hidden_label", h_var.label, "what the trace identified the returned hidden_states as")
    fam.add("x2.residual_label", r_var.label, "what the trace identified the returned residual as")
    fam.add("x2.rel_hidden", wrong, "‖hidden_states − x₂‖/‖x₂‖",
            None if wrong > tol else f"layer {LAYER}'s returned hidden_states is now within {tol} of x₂ "
            f"(rel {wrong:.3g}): the counterexample no longer holds; reread Qwen3DecoderLayer.forward")
    fam.add("x2.rel_sum", right, "‖(residual + hidden_states) − x₂‖/‖x₂‖",
            None if right <= tol else f"residual + hidden_states of layer {LAYER} is {right:.3g} from x₂ "
            f"(tolerance {tol}): the identity the diagram shows no longer holds")
    fam.add("x2.found_at", f"{found[0].function} L{found[0].line} `{found[1].name}` (layer {found[0].layer})"
            if found else "", "where the trace found a variable equal to x₂ of that layer")
    found_match = _matches(found[1], "x2", LAYER) if found else None
    fam.add("x2.found_rel", float(found_match["rel"]) if found_match else -1.0,
            "its relative distance to x₂ as the trace measured it")
    fam.add("x2.token", tok, "token whose channels are listed")
    fam.add("x2.channels", chans, "channels of largest |x₂| of that token")
    fam.add("x2.hidden", [float(h[tok, i]) for i in chans], "returned hidden_states at those channels")
    fam.add("x2.residual", [float(r[tok, i]) for i in chans], "returned residual at those channels")
    fam.add("x2.sum", [float(added[tok, i]) for i in chans], "residual + hidden_states at those channels")
    fam.add("x2.x2", [float(x2[tok, i]) for i in chans], "the trace's x₂ (HF peer) at those channels")


def family(mods: dict[str, Any], root: Path) -> Family:
    """``traced.*`` from the trace :func:`pick_trace` chooses, or ``traced.available`` = False."""
    fam = Family("traced")
    trace, why = pick_trace(root)
    fam.add("available", trace is not None, "a trace with saved tensors was found")
    fam.add("missing", why, "why no trace could be drawn ('' when one was)")
    if trace is not None:
        _fused(fam, mods, trace)
        returned(fam, trace)
    return fam
