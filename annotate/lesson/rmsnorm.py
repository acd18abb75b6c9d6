"""RMSNorm claims: the worked example x=[3,4] run through the vendored ``RMSNorm``.

Every value comes from the vendored module (its output, or a local read when its method returns);
every check compares with the closed form computed here in plain Python, so a change in the
vendored code's behaviour makes the claim fail instead of silently changing the page.
"""
from __future__ import annotations

import math
from typing import Any

from annotate.lesson.capture import locals_at_return
from annotate.lesson.model import Family, differs, mismatch

FORMULA = "the closed form γ·x/√(mean(x²)+ε)"
SOURCE = "the vendored RMSNorm"
BF16_TOL = 2.0 ** -7  # one bfloat16 step near 1.0 (8 significant bits)
#: the lesson's worked example (x, γ, ε); the diagrams page draws the same one
EXAMPLE = ([3.0, 4.0], [1.0, 1.0], 0.0)
#: a second token beside the example's, so the diagram shows which axis the mean runs over
TOKEN1 = [1.0, -2.0]


def closed_form(x: list[float], gamma: list[float], eps: float) -> tuple[float, float, list[float]]:
    """(mean of squares, RMS, output) of RMSNorm in plain Python."""
    mean_sq = sum(v * v for v in x) / len(x)
    rms = math.sqrt(mean_sq + eps)
    return mean_sq, rms, [g * v / rms for g, v in zip(gamma, x)]


def vendored_norm(layernorm: Any, gamma: Any, eps: float) -> Any:
    """A vendored RMSNorm with weight γ (a 1-D tensor) and ε, in γ's dtype (``traced`` uses it too)."""
    import torch

    norm = layernorm.RMSNorm(gamma.numel(), eps=eps).to(gamma.dtype)
    with torch.no_grad():
        norm.weight.copy_(gamma)
    return norm


def run_plain(layernorm: Any, x: list[float], gamma: list[float], eps: float) -> tuple[float, list[float]]:
    """(mean of squares read inside ``rms_forward``, output) for one float32 row."""
    import torch

    norm = vendored_norm(layernorm, torch.tensor(gamma, dtype=torch.float32), eps)
    with torch.no_grad(), locals_at_return(layernorm.RMSNorm.rms_forward) as seen:
        out = norm(torch.tensor([x], dtype=torch.float32))  # a fresh tensor: fp32 runs normalise in place
    inner = seen.get(layernorm.RMSNorm.rms_forward.__qualname__, {})
    if "var" not in inner:
        raise LookupError("RMSNorm.rms_forward no longer has a local `var` (the mean of squares)")
    return float(inner["var"].reshape(-1)[0]), [float(v) for v in out.reshape(-1)]


def run_rows(layernorm: Any, rows: list[list[float]], gamma: list[float], eps: float) -> tuple[list[float], list[list[float]]]:
    """(mean of squares per row, read inside ``rms_forward``; output rows) for a float32 batch of rows."""
    import torch

    norm = vendored_norm(layernorm, torch.tensor(gamma, dtype=torch.float32), eps)
    with torch.no_grad(), locals_at_return(layernorm.RMSNorm.rms_forward) as seen:
        out = norm(torch.tensor(rows, dtype=torch.float32))
    inner = seen.get(layernorm.RMSNorm.rms_forward.__qualname__, {})
    if "var" not in inner:
        raise LookupError("RMSNorm.rms_forward no longer has a local `var` (the mean of squares)")
    return [float(v) for v in inner["var"].reshape(-1)], [[float(v) for v in r] for r in out]


def batch(fam: Family, layernorm: Any) -> None:
    """``rmsnorm.batch.*``: the example's token and TOKEN1 in one batch; one mean per token (over H)."""
    x, gamma, eps = EXAMPLE
    rows = [x, TOKEN1]
    means, out = run_rows(layernorm, rows, gamma, eps)
    want = [closed_form(r, gamma, eps) for r in rows]
    fam.add("batch.x", rows, "two tokens (rows), H values each")
    fam.add("batch.mean_sq", means, "mean of squares per token: the local `var` of RMSNorm.rms_forward",
            mismatch(means, [w[0] for w in want], 1e-6, f"{SOURCE} (local `var`, two tokens)", "mean over H per token"))
    fam.add("batch.rms", [math.sqrt(m + eps) for m in means], "RMS per token")
    fam.add("batch.output", out, "output of the vendored RMSNorm on the two tokens (float32)",
            mismatch(out, [w[2] for w in want], 1e-5, SOURCE + " (two tokens)", FORMULA + " per token"))


def run_fused(layernorm: Any, hidden: list[float], residual: list[float], dtype: Any) -> tuple[list[float], list[float]]:
    """(output, returned residual) of ``add_rms_forward`` (γ=1, ε=0) for one row in ``dtype``."""
    import torch

    norm = vendored_norm(layernorm, torch.tensor([1.0] * len(hidden)).to(dtype), 0.0)  # float32 γ rounded to dtype
    with torch.no_grad():
        out, res = norm(torch.tensor([hidden], dtype=dtype), torch.tensor([residual], dtype=dtype))
    return [float(v) for v in out.reshape(-1)], [float(v) for v in res.reshape(-1)]


def example(fam: Family, layernorm: Any, tag: str, x: list[float], gamma: list[float], eps: float) -> None:
    """Claims ``rmsnorm.<tag>.{x,gamma,eps,mean_sq,rms,output}`` for one float32 example."""
    mean_sq, out = run_plain(layernorm, x, gamma, eps)
    want_mean, want_rms, want_out = closed_form(x, gamma, eps)
    rms = math.sqrt(mean_sq + eps)
    fam.add(f"{tag}.x", x, "input row")
    fam.add(f"{tag}.gamma", gamma, "RMSNorm weight γ")
    fam.add(f"{tag}.eps", eps, "ε")
    fam.add(f"{tag}.mean_sq", mean_sq, "mean of squares: the local `var` of RMSNorm.rms_forward",
            mismatch(mean_sq, want_mean, 1e-6, f"{SOURCE} (local `var`)", "mean(x²)"))
    fam.add(f"{tag}.rms", rms, "√(var + ε) from the vendored run",
            mismatch(rms, want_rms, 1e-6, SOURCE, "√(mean(x²)+ε)"))
    fam.add(f"{tag}.output", out, "output of the vendored RMSNorm (float32)",
            mismatch(out, want_out, 1e-5, SOURCE, FORMULA))


def _fused(fam: Family, layernorm: Any) -> None:
    """The fused path: hidden=[1,2] plus residual=[2,2] is x=[3,4], normalised in bfloat16."""
    import torch

    hidden, residual = [1.0, 2.0], [2.0, 2.0]
    total = [h + r for h, r in zip(hidden, residual)]
    out, res = run_fused(layernorm, hidden, residual, torch.bfloat16)
    _, _, want = closed_form(total, [1.0, 1.0], 0.0)
    fam.add("fused.hidden", hidden, "hidden_states entering add_rms_forward")
    fam.add("fused.residual_in", residual, "residual entering add_rms_forward")
    fam.add("fused.residual", res, "residual returned by add_rms_forward (bfloat16)",
            differs(res, total, "the vendored add_rms_forward (returned residual)", "hidden + residual"))
    fam.add("fused.output", out, "normalised output of add_rms_forward (bfloat16)",
            mismatch(out, want, BF16_TOL, "the vendored add_rms_forward (bfloat16)", FORMULA + " of hidden + residual"))


def fused_fp32_alias(fam: Family, layernorm: Any) -> None:
    """In float32 the returned residual is the normalised tensor itself (the lesson's aside says so)."""
    import torch

    out, res = run_fused(layernorm, [1.0, 2.0], [2.0, 2.0], torch.float32)
    aliased = res == out
    fam.add("fused_fp32.residual", res, "residual returned by add_rms_forward in float32",
            None if aliased else f"the vendored add_rms_forward in float32 now returns residual {res} "
            f"≠ output {out}: it no longer aliases; rewrite the float32 aside")


def family(mods: dict[str, Any]) -> Family:
    """All RMSNorm claims."""
    fam, layernorm = Family("rmsnorm"), mods["layernorm"]
    example(fam, layernorm, "example", *EXAMPLE)
    batch(fam, layernorm)
    example(fam, layernorm, "eps1", [3.0, 4.0], [1.0, 1.0], 1.0)
    example(fam, layernorm, "gamma", [3.0, 4.0], [2.0, 0.5], 0.0)
    _fused(fam, layernorm)
    fused_fp32_alias(fam, layernorm)
    return fam
