"""vLLM's native (pure torch) fused add + RMSNorm, run on the inputs a nano-vllm trace recorded.

vLLM's ``RMSNorm.forward_native`` (``vllm/model_executor/layers/layernorm.py``) calls
``ir.ops.fused_add_rms_norm`` (``vllm/ir/ops/layernorm.py``), whose body is plain torch. That layer
module cannot be imported here (it pulls in vLLM's platform, env and custom-op machinery, and vLLM
is not installed), but the op's own module needs only torch and one decorator, ``register_op`` from
``vllm.ir.op``, which registers the op with vLLM's dispatcher. So the *vendored* op file is executed
as it is, under a private package name, with that one decorator replaced by a stand-in that returns
the function unchanged. A site build passes the op file's bytes from its snapshot (the very bytes a
strict build checked against the lock, read once).
The CUDA C kernel (an op of vLLM's compiled ``_C`` extension) needs the compiled extension and a GPU:
it is not run.

For every ``add_rms_forward`` call whose tensors a trace saved, the op gets the call's recorded
arguments and its results are compared two ways:

- with nano-vllm's *eager replay* of the compiled body (its recorded lines): the rounded residual and
  the normalised sum before γ (the op called without a weight), and with HF's order (round first, then
  normalise the rounded residual);
- with the *compiled* call's outputs (what the caller received, recorded after ``RMSNorm.forward``'s
  line that calls it: what the rest of the site shows), the op called with the layer's γ — regenerated
  from the preset checkpoint the trace names (traces keep no parameters); not for a --model trace.
"""
from __future__ import annotations

import dataclasses
import sys
import types
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from annotate.trace.model.numerics import Distance, distance
from annotate.trace.format.store import ADD_RMS
from annotate.vendoring.lock import upstream_dir

OPS_FILE = "vllm/ir/ops/layernorm.py"
VENDOR = upstream_dir("vllm")
_PACKAGE = "_annotate_vendored_vllm"
#: the traced method that calls the compiled add_rms_forward and returns its outputs
CALLER = "RMSNorm.forward"


@dataclass(frozen=True)
class FusedCompare:
    """One recorded call: vLLM native vs nano-vllm (residual, normalised sum) and HF's order vs nano-vllm."""

    module: str
    layer: int | None
    residual: Distance      # vLLM's new residual vs nano-vllm's `residual = x.to(orig_dtype)`
    normalised: Distance    # vLLM's output (no weight) vs nano-vllm's normalised fp32 sum, rounded
    hf_normalised: Distance  # normalising the *rounded* residual (HF's order) vs nano-vllm's
    compiled_residual: Distance | None = None  # vLLM with γ vs the compiled call's residual (None: no γ or output)
    compiled_out: Distance | None = None       # vLLM with γ vs the compiled call's normalised output


def _register_op(fn: Callable | None = None, **_: Any) -> Any:
    """Stand-in for ``vllm.ir.op.register_op``: the function itself, with the registration hooks as no-ops."""
    def wrap(f: Callable) -> Callable:
        f.register_input_generator = lambda gen: gen  # type: ignore[attr-defined]
        f.override_tolerance = lambda *a, **k: None  # type: ignore[attr-defined]
        f.maybe_inplace = f  # type: ignore[attr-defined]
        return f
    return wrap(fn) if fn is not None else wrap


def load_ops(data: bytes) -> types.ModuleType:
    """The vendored ``vllm/ir/ops/layernorm.py`` from its bytes (a build passes the ones its snapshot
    verified, so it runs exactly those), executed with the registration decorator stood in."""
    where = f"{VENDOR}/{OPS_FILE}"   # what tracebacks from the op name
    packages = {name: types.ModuleType(name) for name in (_PACKAGE, f"{_PACKAGE}.ir", f"{_PACKAGE}.ir.ops")}
    for pkg in packages.values():
        pkg.__path__ = []
    op = types.ModuleType(f"{_PACKAGE}.ir.op")
    op.register_op = _register_op  # type: ignore[attr-defined]
    module = types.ModuleType(f"{_PACKAGE}.ir.ops.layernorm")
    module.__package__ = f"{_PACKAGE}.ir.ops"
    module.__file__ = where
    saved = {k: sys.modules.get(k) for k in [*packages, op.__name__, module.__name__]}
    sys.modules.update(packages)
    sys.modules[op.__name__] = op
    sys.modules[module.__name__] = module
    try:
        exec(compile(data, where, "exec"), module.__dict__)
    finally:
        for name, old in saved.items():
            if old is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = old
    return module


def compare_trace(ops: bytes, trace: Any, weights: Mapping[str, Any] | None = None) -> list[FusedCompare]:
    """Run vLLM's native op (the op file's bytes, see :func:`load_ops`) on every recorded add_rms_forward
    call with saved tensors (empty when none). `weights` (the checkpoint's, by HF name) adds the comparison
    with γ against the compiled call's outputs."""
    import torch

    calls: dict[tuple[str, int], dict[str, Any]] = {}
    for r in trace.records:
        if r.function == ADD_RMS:
            calls.setdefault((r.module or "", r.call), {"layer": r.layer, "records": []})["records"].append(r)
    if not calls:
        return []
    native = load_ops(ops)
    eps = float(trace.meta["model"]["config"].get("rms_norm_eps", 1e-6))
    out = []
    for (module, call_no), call in calls.items():
        got = _tensors(trace, call["records"])
        if got is None:
            continue
        x, residual, nano_residual, nano_norm = got
        v_norm, v_res = native.fused_add_rms_norm(x.clone(), residual.clone(), None, eps)
        rounded = nano_residual.float()
        hf_norm = (rounded * torch.rsqrt(rounded.pow(2).mean(dim=-1, keepdim=True) + eps)).to(x.dtype)
        nano = nano_norm.to(x.dtype)
        found = FusedCompare(module, call["layer"], distance(v_res, nano_residual), distance(v_norm, nano),
                             distance(hf_norm, nano))
        gamma = (weights or {}).get(f"{module}.weight")
        compiled = _compiled_outputs(trace, module, call_no)
        if gamma is not None and compiled is not None:
            g_norm, g_res = native.fused_add_rms_norm(x.clone(), residual.clone(), gamma, eps)
            found = dataclasses.replace(found, compiled_residual=distance(g_res, compiled[1]),
                                        compiled_out=distance(g_norm, compiled[0]))
        out.append(found)
    return out


def _compiled_outputs(trace: Any, module: str, call: int) -> tuple[Any, Any] | None:
    """(normalised output, residual) the compiled add_rms_forward returned to ``RMSNorm.forward`` in this call."""
    rec = next((r for r in trace.records if r.function == CALLER and r.module == module and r.call == call
                and r.var("return[0]") is not None and r.var("return[1]") is not None), None)
    if rec is None or rec.var("return[0]").tensor is None or rec.var("return[1]").tensor is None:
        return None
    try:
        return trace.tensor(rec.var("return[0]").tensor), trace.tensor(rec.var("return[1]").tensor)
    except KeyError:
        return None


def _tensors(trace: Any, records: list[Any]) -> tuple[Any, Any, Any, Any] | None:
    """(x, residual) at entry, the rounded residual, and the normalised fp32 sum before γ — when all were saved."""
    entry = next((r for r in records if r.kind == "entry"), None)
    lines = sorted({r.line for r in records if r.kind == "line"})
    by_line = {r.line: r for r in records if r.kind == "line"}
    rnd = next((by_line[n] for n in lines if by_line[n].var("residual") and n > lines[0]
                and by_line[n].var("residual").dtype != "float32" and _assigns(trace, n, "residual")), None)
    norm = [by_line[n] for n in lines if _assigns(trace, n, "x") and by_line[n].var("x")
            and by_line[n].var("x").dtype == "float32"]
    if entry is None or rnd is None or len(norm) < 2:
        return None
    keys = [entry.var("x"), entry.var("residual"), rnd.var("residual"), norm[-1].var("x")]
    if any(k is None or k.tensor is None for k in keys):
        return None
    try:
        return tuple(trace.tensor(k.tensor) for k in keys)
    except KeyError:
        return None


def _assigns(trace: Any, line: int, name: str) -> bool:
    info = trace.function(ADD_RMS) or {}
    return any(s["line"] == line and name in s["targets"] for s in info.get("statements", []))
