"""annotate.trace.identify.shards on the real `--preset tiny --tp 2` run: every shard, partial sum, Σ and
post-all_reduce tensor identified by comparison (with HF transformers' slices and a --tp 1 run)."""
from __future__ import annotations

import pytest
import torch

from annotate.trace.model.options import PRESETS
from annotate.trace.identify.shards import Shape, bytes_per_token, identify_slice

pytestmark = pytest.mark.slow

TINY = PRESETS["tiny"]
LAYERS = TINY.default_layers


def test_every_rank_is_recorded(tiny_trace_tp2) -> None:
    """Both ranks' records are in the trace, with the tensor-parallel forwards' lines on each."""
    t = tiny_trace_tp2.trace
    assert t.tp == 2 and sorted(t.ranks) == [1]
    for recs in (t.records, t.ranks[1]):
        fns = {r.function for r in recs}
        assert {"RowParallelLinear.forward", "VocabParallelEmbedding.forward", "Qwen3DecoderLayer.forward"} <= fns


def test_every_shard_is_found_in_its_own_rank_slice(tiny_trace_tp2) -> None:
    """qkv, o, gate_up, act, both partial sums per layer and the embedding partial, on each rank: the
    HF slice each one matches (out of both ranks' slices) is its own rank's, and only that one."""
    shards = tiny_trace_tp2.payload["parallel"]["shards"]
    kinds = {"qkv", "o", "o_proj partial", "gate_up", "act", "down_proj partial"}
    assert len(shards) == 2 * (len(kinds) * LAYERS + 1)
    for s in shards:
        assert s["slice"] == s["rank"], s
        other = s["distances"][1 - s["rank"]]
        assert other is not None and not other["within"], s   # the other rank's slice is far
    assert {s["what"] for s in shards} == kinds | {"embed partial"}


def test_partial_sums_add_up_to_the_increments(tiny_trace_tp2) -> None:
    """Σ_r partial ≡ HF's attention and MLP increments per layer, and x⁽⁰⁾ for the embedding."""
    sums = tiny_trace_tp2.payload["parallel"]["sums"]
    assert sorted((s["peer"], s["layer"]) for s in sums) == sorted(
        [("attn", n) for n in range(LAYERS)] + [("mlp", n) for n in range(LAYERS)] + [("x", 0)])
    assert all(s["within"] for s in sums), [s for s in sums if not s["within"]]


def test_every_post_all_reduce_tensor_matches_tp1(tiny_trace_tp2) -> None:
    """The reduced `y` of every o_proj / down_proj / embedding and every decoder-layer value equal the
    --tp 1 run's within the identification tolerance; the distance in ulps is stated per tensor."""
    rows = tiny_trace_tp2.payload["parallel"]["vs_tp1"]
    reduced = {r["module"] for r in rows if r["function"] == "RowParallelLinear.forward"}
    assert len(reduced) == 2 * LAYERS
    assert any(r["module"] == "model.embed_tokens" for r in rows)
    assert {r["layer"] for r in rows if r["function"] == "Qwen3DecoderLayer.forward"} == set(range(LAYERS))
    assert all(r["within"] for r in rows), [r for r in rows if not r["within"]][:3]
    assert all(r["scale_ulps"] >= 0 and r["max_abs"] >= 0 for r in rows)


def test_partial_and_full_sums_differ_on_the_all_reduce_line(tiny_trace_tp2) -> None:
    """The recorder kept the partial `y` (before `all_reduce`) apart from the full one (after it, in place)."""
    t = tiny_trace_tp2.trace
    rows = [r for r in t.records if r.function == "RowParallelLinear.forward" and r.module.endswith("o_proj")
            and r.layer == 0 and r.kind == "line"]
    ys = [r.var("y") for r in rows if r.var("y") is not None]
    assert len(ys) >= 2
    partial, full = t.tensor(ys[0].tensor), t.tensor(ys[-1].tensor)
    other = [r for r in t.ranks[1] if r.function == "RowParallelLinear.forward" and r.module == rows[0].module
             and r.kind == "line" and r.var("y") is not None]
    other_partial = t.tensor(other[0].var("y").tensor)
    assert not torch.equal(partial, full)
    assert torch.allclose((partial.float() + other_partial.float()).to(full.dtype).float(), full.float(), atol=0.02)


def test_bytes_per_token_match_the_trace(tiny_trace_tp2) -> None:
    """H·(bytes of the dtype) per all_reduce, from the config, equals what the trace's reduced tensors hold."""
    b = tiny_trace_tp2.payload["parallel"]["bytes"]
    assert b["measured_per_all_reduce"] == [b["per_all_reduce"]] == [TINY.hidden_size * 2]
    assert b["all_reduces"] == 2 * LAYERS + 1


def test_slices_and_bytes_from_the_config() -> None:
    s = Shape.of({"num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128, "hidden_size": 1024,
                  "intermediate_size": 3072, "vocab_size": 151936}, 2)
    assert s.span("inter", 1) == (1536, 3072) and s.span("heads", 1) == (1024, 2048)   # elements: 8 heads × 128
    assert bytes_per_token({"hidden_size": 1024, "num_hidden_layers": 28}, 2, 2)["per_layer"] == 4096


def test_identify_slice_refuses_a_tensor_far_from_every_slice() -> None:
    a, b = torch.randn(4, 8), torch.randn(4, 8)
    assert identify_slice(a, [b, a])["slice"] == 1
    assert identify_slice(torch.randn(4, 8) * 10, [a, b])["slice"] is None


def test_a_slice_is_named_only_with_the_margin_every_identity_needs() -> None:
    """Two slices both within tolerance of the value (a near-copy): no slice is named, both are listed."""
    a = torch.randn(4, 8, dtype=torch.bfloat16)
    near = (a.float() * 1.01).to(torch.bfloat16)
    found = identify_slice(a, [a, near])
    assert found["slice"] is None and sorted(found["ambiguous"]) == [0, 1] and found["margin"] < found["required"]
    clear = identify_slice(a, [torch.randn(4, 8, dtype=torch.bfloat16), a])
    assert clear["slice"] == 1 and clear["margin"] >= clear["required"]
