"""Counterexamples for the diagrams page, computed by running the vendored code the wrong way round.

- ``counter.layernorm.*``: LayerNorm instead of RMSNorm on the lesson's x = [3, 4]: subtract the
  mean first, then run the vendored ``RMSNorm`` on the centred row (for γ = 1-like weights and no
  bias that *is* LayerNorm); checked against ``torch.nn.functional.layer_norm``. The claim fails
  when the wrong reading no longer changes the output (the counterexample would prove nothing).
- ``counter.swap.*``: ``chunk`` read as (up, gate): the walk-through's weights loaded into the
  vendored ``Qwen3MLP`` with the gate/up shards exchanged, so its own ``chunk`` hands up to SiLU;
  checked against SiLU(x·W_uᵀ)⊙(x·W_gᵀ) in plain torch, and it must differ from the right output.
"""
from __future__ import annotations

import math
from typing import Any

from annotate.lesson import rmsnorm, swiglu
from annotate.lesson.model import Family, flat, mismatch

COUNTER_TOL = 1e-5


def _same(a: list[float], b: list[float], tol: float = COUNTER_TOL) -> bool:
    return len(a) == len(b) and all(math.isclose(x, y, rel_tol=tol, abs_tol=tol) for x, y in zip(a, b))


def layernorm(fam: Family, mods: dict[str, Any]) -> None:
    """``counter.layernorm.{mean,centred,mean_sq,rms,output,rmsnorm_output}``."""
    import torch

    x, gamma, eps = rmsnorm.EXAMPLE
    mean = sum(x) / len(x)
    centred = [v - mean for v in x]
    mean_sq, out = rmsnorm.run_plain(mods["layernorm"], centred, gamma, eps)
    _, right = rmsnorm.run_plain(mods["layernorm"], x, gamma, eps)
    want = torch.nn.functional.layer_norm(torch.tensor([x]), (len(x),), weight=torch.tensor(gamma), eps=eps)
    src = "the vendored RMSNorm on x − mean(x)"
    fam.add("layernorm.mean", mean, "mean(x), what LayerNorm subtracts first")
    fam.add("layernorm.centred", centred, "x − mean(x)")
    fam.add("layernorm.mean_sq", mean_sq, "mean((x − mean)²): the variance LayerNorm divides by")
    fam.add("layernorm.rms", math.sqrt(mean_sq + eps), "√(variance + ε)")
    fam.add("layernorm.output", out, "LayerNorm(x) (γ, no bias), by the vendored RMSNorm on the centred row",
            mismatch(out, flat(want.reshape(-1).tolist()), COUNTER_TOL, src, "torch.nn.functional.layer_norm"))
    fam.add("layernorm.rmsnorm_output", right, "RMSNorm(x) by the vendored RMSNorm, for comparison",
            f"LayerNorm and RMSNorm now agree on x = {x} ({right}): the counterexample shows nothing; "
            "pick another example" if _same(out, right) else None)


def swap(fam: Family, mods: dict[str, Any]) -> None:
    """``counter.swap.{gate,up,silu,product,out,right_out}``: the MLP with chunk read as (up, gate)."""
    import torch

    right = swiglu.run_walk(mods)
    wrong = swiglu.run_walk(mods, shards=(1, 0))
    w_gate, w_up, w_down = (torch.tensor(w) for w in swiglu.walk_weights())
    xt = torch.tensor([swiglu.WALK_X])
    want = ((torch.nn.functional.silu(xt @ w_up.T) * (xt @ w_gate.T)) @ w_down.T).reshape(-1).tolist()
    src = "the vendored Qwen3MLP with gate_proj/up_proj loaded into each other's shard"
    fam.add("swap.gate", wrong["gate"], "what SiLU receives when chunk is read as (up, gate): x·W_uᵀ")
    fam.add("swap.up", wrong["up"], "the other half: x·W_gᵀ")
    fam.add("swap.silu", wrong["silu"], "SiLU of the wrong half")
    fam.add("swap.product", wrong["product"], "SiLU(x·W_uᵀ) ⊙ x·W_gᵀ")
    fam.add("swap.out", wrong["out"], "Qwen3MLP output with the halves exchanged",
            mismatch(wrong["out"], want, COUNTER_TOL, src, "SiLU(x·W_uᵀ)⊙(x·W_gᵀ)·W_dᵀ in plain torch"))
    fam.add("swap.right_out", right["out"], "the right output, for comparison",
            "exchanging gate and up no longer changes the output of the walk-through: "
            "the counterexample shows nothing" if _same(wrong["out"], right["out"]) else None)


def family(mods: dict[str, Any]) -> Family:
    """Both counterexamples that need no trace."""
    fam = Family("counter")
    layernorm(fam, mods)
    swap(fam, mods)
    return fam
