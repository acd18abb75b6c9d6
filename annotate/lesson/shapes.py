"""Shape claims for the quick-reference page: one Qwen3-0.6B-sized attention block and decoder layer.

Modules are instantiated on the meta device (shapes, no memory) from the vendored classes; each
shape and count is checked against the formula the reference page prints next to it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from annotate.lesson.model import Family, differs


@dataclass(frozen=True)
class Dims:
    """The sizes of one Qwen3 configuration (defaults: Qwen3-0.6B)."""

    hidden: int = 1024  # H
    heads: int = 16  # n_q
    kv_heads: int = 8  # n_kv
    head_dim: int = 128  # D
    intermediate: int = 3072  # F


def shape_text(shape: Any) -> str:
    return " × ".join(str(n) for n in shape)


def attention(fam: Family, qwen3: Any, d: Dims) -> int:
    """``shape.attn.*`` from a vendored Qwen3Attention; returns its parameter count."""
    import torch

    with torch.device("meta"):
        attn = qwen3.Qwen3Attention(d.hidden, d.heads, d.kv_heads, head_dim=d.head_dim, qkv_bias=False)
    src = "the vendored Qwen3Attention"
    qkv, o = shape_text(attn.qkv_proj.weight.shape), shape_text(attn.o_proj.weight.shape)
    qn = shape_text(attn.q_norm.weight.shape)
    fam.add("attn.qkv", qkv, "qkv_proj.weight shape (out × in)",
            differs(qkv, f"{(d.heads + 2 * d.kv_heads) * d.head_dim} × {d.hidden}", src + ".qkv_proj.weight", "(n_q+2·n_kv)·D × H"))
    fam.add("attn.o", o, "o_proj.weight shape (out × in)",
            differs(o, f"{d.hidden} × {d.heads * d.head_dim}", src + ".o_proj.weight", "H × n_q·D"))
    fam.add("attn.q_norm", qn, "q_norm.weight shape (per head: D)", differs(qn, str(d.head_dim), src + ".q_norm.weight", "D"))
    total = sum(p.numel() for p in attn.parameters())
    want = (d.heads + 2 * d.kv_heads) * d.head_dim * d.hidden + d.hidden * d.heads * d.head_dim + 2 * d.head_dim
    fam.add("attn.params", total, "parameters of Qwen3Attention", differs(total, want, src, "(n_q+2·n_kv)·D·H + H·n_q·D + 2D"))
    return total


def layer(fam: Family, qwen3: Any, d: Dims, attn_params: int) -> None:
    """``shape.layer.params``: a whole vendored Qwen3DecoderLayer."""
    import torch
    from transformers import Qwen3Config

    cfg = Qwen3Config(hidden_size=d.hidden, intermediate_size=d.intermediate, num_attention_heads=d.heads,
                      num_key_value_heads=d.kv_heads, head_dim=d.head_dim, num_hidden_layers=1,
                      attention_bias=False, hidden_act="silu", rope_scaling=None)
    with torch.device("meta"):
        block = qwen3.Qwen3DecoderLayer(cfg)
    total = sum(p.numel() for p in block.parameters())
    want = attn_params + 3 * d.hidden * d.intermediate + 2 * d.hidden
    fam.add("layer.params", total, "parameters of one Qwen3DecoderLayer",
            differs(total, want, "the vendored Qwen3DecoderLayer", "attention + 3·H·F + 2·H"))


def family(mods: dict[str, Any]) -> Family:
    """All shape claims, at the Qwen3-0.6B sizes."""
    fam, d = Family("shape"), Dims()
    fam.add("h", d.hidden, "H")
    fam.add("heads", d.heads, "n_q")
    fam.add("kv_heads", d.kv_heads, "n_kv")
    fam.add("head_dim", d.head_dim, "D")
    fam.add("f", d.intermediate, "F")
    layer(fam, mods["qwen3"], d, attention(fam, mods["qwen3"], d))
    return fam
