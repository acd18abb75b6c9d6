"""Counterexamples for the diagrams page, computed by running the vendored code the wrong way round.

- ``counter.layernorm.*``: LayerNorm instead of RMSNorm on the lesson's x = [3, 4]: subtract the
  mean first, then run the vendored ``RMSNorm`` on the centred row (for γ = 1-like weights and no
  bias that *is* LayerNorm); checked against ``torch.nn.functional.layer_norm``. The claim fails
  when the wrong reading no longer changes the output (the counterexample would prove nothing).
- ``counter.swap.*``: ``chunk`` read as (up, gate): the walk-through's weights loaded into the
  vendored ``Qwen3MLP`` with the gate/up shards exchanged, so its own ``chunk`` hands up to SiLU;
  checked against SiLU(x·W_uᵀ)⊙(x·W_gᵀ) in plain torch, and it must differ from the right output.
- ``counter.relu.*``: the same weights with ReLU for SiLU (the vendored MLP, its act_fn replaced);
  checked against plain torch, and it must differ from the SiLU output.
- ``counter.axis.*``: the two-token RMSNorm example normalised over the token axis instead of H
  (the vendored RMSNorm on the transposed batch); checked against the closed form, must differ.
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

    right = swiglu.run_walk(mods)[0]
    wrong = swiglu.run_walk(mods, shards=(1, 0))[0]
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


def relu_act() -> Any:
    """A stand-in for the vendored ``SiluAndMul`` with ReLU in place of SiLU (same split: locals ``x, y``)."""
    import torch

    class ReluAndMul(torch.nn.Module):
        def forward(self, t: Any) -> Any:   # no free variables: its locals are read at return
            x, y = t.chunk(2, -1)
            return x.relu() * y

    return ReluAndMul()


def relu(fam: Family, mods: dict[str, Any]) -> None:
    """``counter.relu.{gate,act,product,out,right_out}``: the walk-through's weights with ReLU for SiLU."""
    import torch

    right = swiglu.run_walk(mods)[0]
    wrong = swiglu.run_walk(mods, act=relu_act())[0]
    w_gate, w_up, w_down = (torch.tensor(w) for w in swiglu.walk_weights())
    xt = torch.tensor([swiglu.WALK_X])
    want = ((torch.relu(xt @ w_gate.T) * (xt @ w_up.T)) @ w_down.T).reshape(-1).tolist()
    src = "the vendored Qwen3MLP with act_fn = ReLU(x)·y"
    fam.add("relu.gate", wrong["gate"], "the gate half (the same as with SiLU: same weights)",
            mismatch(wrong["gate"], right["gate"], COUNTER_TOL, src + " (gate)", "the SiLU run's gate"))
    fam.add("relu.act", wrong["silu"], "ReLU(gate): negative gates become 0")
    fam.add("relu.product", wrong["product"], "ReLU(gate) ⊙ up")
    fam.add("relu.out", wrong["out"], "Qwen3MLP output with ReLU for SiLU",
            mismatch(wrong["out"], want, COUNTER_TOL, src, "(ReLU(x·W_gᵀ)⊙(x·W_uᵀ))·W_dᵀ in plain torch"))
    fam.add("relu.right_out", right["out"], "the SiLU output, for comparison",
            "ReLU and SiLU now give the same output on the walk-through: the counterexample shows nothing"
            if _same(wrong["out"], right["out"]) else None)


def axis(fam: Family, mods: dict[str, Any]) -> None:
    """``counter.axis.{rms,output}``: the two-token example normalised over tokens (per channel) instead of
    over H (per token): the vendored RMSNorm run on the transposed batch, then γ per channel."""
    x, gamma, eps = rmsnorm.EXAMPLE
    rows = [x, rmsnorm.TOKEN1]
    cols = [list(c) for c in zip(*rows)]                       # one row per channel, T values each
    means, normed = rmsnorm.run_rows(mods["layernorm"], cols, [1.0] * len(rows), eps)
    out = [[gamma[i] * normed[i][t] for i in range(len(cols))] for t in range(len(rows))]
    want = [[gamma[i] * rows[t][i] / math.sqrt(sum(v * v for v in cols[i]) / len(rows) + eps)
             for i in range(len(cols))] for t in range(len(rows))]
    _, right = rmsnorm.run_rows(mods["layernorm"], rows, gamma, eps)
    fam.add("axis.rms", [math.sqrt(m + eps) for m in means], "RMS per channel, over the tokens (the wrong axis)")
    fam.add("axis.output", out, "the two tokens normalised over the token axis",
            mismatch(out, want, COUNTER_TOL, "the vendored RMSNorm on the transposed batch", "x/RMS over tokens, ·γ"))
    fam.add("axis.right_output", right, "the right output (over H, per token), for comparison",
            "normalising over tokens now gives the same output: the counterexample shows nothing"
            if _same(flat(out), flat(right)) else None)


def family(mods: dict[str, Any]) -> Family:
    """The counterexamples that need no trace."""
    fam = Family("counter")
    layernorm(fam, mods)
    swap(fam, mods)
    relu(fam, mods)
    axis(fam, mods)
    return fam
