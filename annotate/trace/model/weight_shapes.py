"""The weights a Qwen3 model of a given config builds, by name and shape, from config.json alone.

Torch-free and below everything that needs the list: the checkpoint check (runtime) reads it before
any tensor is loaded, and the budget (budget) counts parameters from it without importing the runtime.
"""
from __future__ import annotations

from typing import Any


def expected_weights(config: dict[str, Any], layers: int) -> dict[str, tuple[int, ...]]:
    """HF Qwen3 weight name -> shape for the first ``layers`` decoder layers (what the model will load)."""
    hidden, inter, vocab = config["hidden_size"], config["intermediate_size"], config["vocab_size"]
    heads, kv = config["num_attention_heads"], config["num_key_value_heads"]
    hd = config.get("head_dim") or hidden // heads
    shapes: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (vocab, hidden), "model.norm.weight": (hidden,)}
    if not config.get("tie_word_embeddings", False):
        shapes["lm_head.weight"] = (vocab, hidden)
    for i in range(layers):
        p = f"model.layers.{i}."
        shapes.update({
            p + "self_attn.q_proj.weight": (heads * hd, hidden), p + "self_attn.k_proj.weight": (kv * hd, hidden),
            p + "self_attn.v_proj.weight": (kv * hd, hidden), p + "self_attn.o_proj.weight": (hidden, heads * hd),
            p + "self_attn.q_norm.weight": (hd,), p + "self_attn.k_norm.weight": (hd,),
            p + "mlp.gate_proj.weight": (inter, hidden), p + "mlp.up_proj.weight": (inter, hidden),
            p + "mlp.down_proj.weight": (hidden, inter),
            p + "input_layernorm.weight": (hidden,), p + "post_attention_layernorm.weight": (hidden,)})
    return shapes


def parameter_count(config: dict[str, Any], layers: int) -> int:
    """Elements of every weight :func:`expected_weights` lists, counted arithmetically (one product per
    kind of weight, times ``layers``): a budget never builds an entry per layer."""
    hidden, inter, vocab = config["hidden_size"], config["intermediate_size"], config["vocab_size"]
    heads, kv = config["num_attention_heads"], config["num_key_value_heads"]
    hd = config.get("head_dim") or hidden // heads
    outside = vocab * hidden * (1 if config.get("tie_word_embeddings", False) else 2) + hidden
    per_layer = (2 * heads * hd * hidden + 2 * kv * hd * hidden + 2 * hd
                 + 3 * inter * hidden + 2 * hidden)
    return outside + layers * per_layer
