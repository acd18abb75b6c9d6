"""Qwen3MLP claims: parameter counts (3·H·F) and a one-token SwiGLU walk-through at H=4, F=6.

Counts come from instantiating the vendored ``Qwen3MLP`` (on the meta device: shapes without
memory). The walk-through loads small deterministic weights through the vendored weight loaders
(the same path a checkpoint's gate_proj/up_proj take) and runs the vendored forward; forward hooks
and the locals of ``SiluAndMul.forward`` give every intermediate. Each value is checked against the
same step written independently in plain torch / plain Python.
"""
from __future__ import annotations

import math
from typing import Any

from annotate.lesson.capture import locals_at_return
from annotate.lesson.model import Family, differs, mismatch

SIZES = ((1024, 3072), (8, 16))
WALK_H, WALK_F = 4, 6
WALK_X = [1.0, -1.0, 2.0, 0.5]
#: a second token in the same batch: the diagram shows that the MLP mixes H within a token, never tokens
WALK_X1 = [0.5, 2.0, -1.0, 1.0]
SWIGLU_TOL = 1e-5


def walk_weights(h: int = WALK_H, f: int = WALK_F) -> tuple[list[list[float]], list[list[float]], list[list[float]]]:
    """Small readable weights (tenths): W_gate and W_up are F×H, W_down is H×F (nn.Linear layout)."""
    w_gate = [[((3 * j + 2 * i) % 7 - 3) / 10 for i in range(h)] for j in range(f)]
    w_up = [[((2 * j + 3 * i) % 5 - 2) / 10 for i in range(h)] for j in range(f)]
    w_down = [[((i + 2 * j) % 5 - 2) / 10 for j in range(f)] for i in range(h)]
    return w_gate, w_up, w_down


def counts(fam: Family, qwen3: Any, h: int, f: int) -> None:
    """``mlp.h<H>_f<F>.{params,gate_up,down,gate_up_shape,down_shape}`` from a vendored Qwen3MLP."""
    import torch

    with torch.device("meta"):
        mlp = qwen3.Qwen3MLP(h, f, "silu")
    total = sum(p.numel() for p in mlp.parameters())
    gate_up = sum(p.numel() for p in mlp.gate_up_proj.parameters())
    down = sum(p.numel() for p in mlp.down_proj.parameters())
    src = f"the vendored Qwen3MLP({h}, {f})"
    tag = f"h{h}_f{f}"
    fam.add(f"{tag}.params", total, "parameters of Qwen3MLP", differs(total, 3 * h * f, src, "3·H·F"))
    fam.add(f"{tag}.gate_up", gate_up, "parameters of gate_up_proj",
            differs(gate_up, 2 * h * f, src + ".gate_up_proj", "2·H·F"))
    fam.add(f"{tag}.down", down, "parameters of down_proj", differs(down, h * f, src + ".down_proj", "H·F"))
    shape_gu = " × ".join(str(n) for n in mlp.gate_up_proj.weight.shape)
    shape_d = " × ".join(str(n) for n in mlp.down_proj.weight.shape)
    fam.add(f"{tag}.gate_up_shape", shape_gu, "gate_up_proj.weight shape (out × in)",
            differs(shape_gu, f"{2 * f} × {h}", src + ".gate_up_proj.weight", "2F × H"))
    fam.add(f"{tag}.down_shape", shape_d, "down_proj.weight shape (out × in)",
            differs(shape_d, f"{h} × {f}", src + ".down_proj.weight", "H × F"))


def run_walk(mods: dict[str, Any], shards: tuple[int, int] = (0, 1), xs: tuple[list[float], ...] = (WALK_X,),
             act: Any = None) -> list[dict[str, list[float]]]:
    """Run the tokens ``xs`` (one batch) through a vendored Qwen3MLP(4, 6); every intermediate, per token.

    ``shards`` are the loader's shard ids for (gate_proj, up_proj); ``(1, 0)`` loads them the other
    way round, which is what reading ``chunk`` as (up, gate) amounts to (the diagrams' counterexample).
    ``act`` replaces the vendored ``act_fn`` (a module whose forward splits ``x, y`` as SiluAndMul does):
    the same weights with another activation.
    """
    import torch

    w_gate, w_up, w_down = walk_weights()
    mlp = mods["qwen3"].Qwen3MLP(WALK_H, WALK_F, "silu").float()
    if act is not None:
        mlp.act_fn = act
    gu, d = mlp.gate_up_proj.weight, mlp.down_proj.weight
    gu.weight_loader(gu, torch.tensor(w_gate), shards[0])  # as the loader does for gate_proj
    gu.weight_loader(gu, torch.tensor(w_up), shards[1])  # and for up_proj
    d.weight_loader(d, torch.tensor(w_down))
    outputs: dict[str, Any] = {}
    hooks = [getattr(mlp, name).register_forward_hook(lambda m, i, o, name=name: outputs.__setitem__(name, o.clone()))
             for name in ("gate_up_proj", "act_fn", "down_proj")]
    act_cls = type(mlp.act_fn)
    with torch.no_grad(), locals_at_return(act_cls.forward) as seen:
        out = mlp(torch.tensor([list(x) for x in xs]))
    for hook in hooks:
        hook.remove()
    inner = seen.get(act_cls.forward.__qualname__, {})
    if "x" not in inner or "y" not in inner:
        raise LookupError("SiluAndMul.forward no longer has locals `x, y` (the gate and up halves)")
    with torch.no_grad():  # SiLU(gate) alone: the vendored SiluAndMul on [gate, 1]
        silu = mlp.act_fn(torch.cat([inner["x"], torch.ones(len(xs), WALK_F)], dim=-1))

    def row(t: Any, k: int) -> list[float]:
        return [float(v) for v in t[k].reshape(-1)]

    return [{"gate_up": row(outputs["gate_up_proj"], k), "gate": row(inner["x"], k), "up": row(inner["y"], k),
             "silu": row(silu, k), "product": row(outputs["act_fn"], k), "down": row(outputs["down_proj"], k),
             "out": row(out, k)} for k in range(len(xs))]


def reference(x: list[float]) -> dict[str, Any]:
    """The same steps in plain torch (matmuls, F.silu) and plain Python (SiLU by its definition)."""
    import torch

    w_gate, w_up, w_down = (torch.tensor(w) for w in walk_weights())
    xt = torch.tensor([x])
    gate, up = xt @ w_gate.T, xt @ w_up.T
    product = torch.nn.functional.silu(gate) * up
    silu = [g / (1.0 + math.exp(-g)) for g in gate.reshape(-1).tolist()]
    return {"gate": gate.reshape(-1).tolist(), "up": up.reshape(-1).tolist(), "silu": silu,
            "product": product.reshape(-1).tolist(), "out": (product @ w_down.T).reshape(-1).tolist()}


def walk(fam: Family, mods: dict[str, Any]) -> None:
    """``swiglu.*``: x, weights, gate_up (2F), gate/up (F), SiLU(gate), product, down output (H)."""
    got, want = run_walk(mods)[0], reference(WALK_X)
    w_gate, w_up, w_down = walk_weights()
    src = f"the vendored Qwen3MLP({WALK_H}, {WALK_F})"
    fam.add("h", WALK_H, "hidden size H of the walk-through")
    fam.add("f", WALK_F, "intermediate size F of the walk-through")
    fam.add("x", WALK_X, "the token's input row (H values)")
    for j in range(WALK_F):
        fam.add(f"w_gate_row{j}", w_gate[j], f"row {j} of W_gate (H values)")
        fam.add(f"w_up_row{j}", w_up[j], f"row {j} of W_up (H values)")
    for i in range(WALK_H):
        fam.add(f"w_down_row{i}", w_down[i], f"row {i} of W_down (F values)")
    fam.add("gate_up_width", len(got["gate_up"]), "width of gate_up_proj's output",
            differs(len(got["gate_up"]), 2 * WALK_F, src + ".gate_up_proj output width", "2F"))
    fam.add("gate_up", got["gate_up"], "gate_up_proj output (2F values)",
            mismatch(got["gate_up"], want["gate"] + want["up"], SWIGLU_TOL, src + ".gate_up_proj", "[x·W_gateᵀ, x·W_upᵀ]"))
    fam.add("gate", got["gate"], "first half, inside SiluAndMul",
            mismatch(got["gate"], want["gate"], SWIGLU_TOL, src + " (gate half)", "x·W_gateᵀ"))
    fam.add("up", got["up"], "second half, inside SiluAndMul",
            mismatch(got["up"], want["up"], SWIGLU_TOL, src + " (up half)", "x·W_upᵀ"))
    fam.add("silu", got["silu"], "SiLU(gate) by the vendored SiluAndMul on [gate, 1]",
            mismatch(got["silu"], want["silu"], SWIGLU_TOL, "the vendored SiluAndMul", "g/(1+e^(−g))"))
    fam.add("product", got["product"], "SiluAndMul output: SiLU(gate) ⊙ up",
            mismatch(got["product"], want["product"], SWIGLU_TOL, "the vendored SiluAndMul", "SiLU(gate)⊙up"))
    terms = [p * w for p, w in zip(got["product"], w_down[0])]
    fam.add("down_terms0", terms, "product[j]·W_down[0][j], whose sum is out[0]")
    fam.add("out", got["out"], "Qwen3MLP output (H values)",
            mismatch(got["out"], want["out"], SWIGLU_TOL, src, "(SiLU(x·W_gateᵀ)⊙(x·W_upᵀ))·W_downᵀ in plain torch"))
    fam.add("out_matches_down", got["out"] == got["down"], "forward output is down_proj's output",
            None if got["out"] == got["down"] else f"{src} returns {got['out']}, not down_proj's output {got['down']}")


def second_token(fam: Family, mods: dict[str, Any]) -> None:
    """``swiglu.tok1.*``: both tokens in one batch; token 1's steps, and token 0 unchanged by its neighbour."""
    both = run_walk(mods, xs=(WALK_X, WALK_X1))
    alone, want = run_walk(mods)[0], reference(WALK_X1)
    src = f"the vendored Qwen3MLP({WALK_H}, {WALK_F}) on two tokens"
    fam.add("tokens", 2, "tokens in the two-token batch")
    fam.add("tok1.x", WALK_X1, "token 1's input row (H values)")
    for name in ("gate_up", "gate", "up", "silu", "product", "out"):
        ref = want["gate"] + want["up"] if name == "gate_up" else want[name]
        fam.add(f"tok1.{name}", both[1][name], f"token 1: {name} in the two-token batch",
                mismatch(both[1][name], ref, SWIGLU_TOL, src + f" (token 1, {name})", "the same steps in plain torch"))
    fam.add("tok0_in_batch", both[0]["out"], "token 0's output in the two-token batch",
            mismatch(both[0]["out"], alone["out"], SWIGLU_TOL, src + " (token 0)", "token 0 run alone"))


def mlp_family(mods: dict[str, Any]) -> Family:
    """Parameter counts for each size in SIZES."""
    fam = Family("mlp")
    for h, f in SIZES:
        counts(fam, mods["qwen3"], h, f)
    return fam


def swiglu_family(mods: dict[str, Any]) -> Family:
    """The H=4, F=6 walk-through."""
    fam = Family("swiglu")
    walk(fam, mods)
    second_token(fam, mods)
    return fam
