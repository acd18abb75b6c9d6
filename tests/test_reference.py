"""annotate.trace.reference: the HF peer's variables and identification by comparison."""
from __future__ import annotations

import pytest
import torch

from annotate.trace.reference import Identifier, MathValue, PeerRun, TOLERANCE

QWEN3 = "nanovllm/models/qwen3.py"


def _ref(values: dict[tuple[str, int], torch.Tensor]) -> PeerRun:
    return PeerRun([MathValue(k, n, t) for (k, n), t in values.items()], "eager", "test")


def test_identification_is_by_comparison() -> None:
    g = torch.Generator().manual_seed(0)
    a = torch.randn(4, 8, generator=g).bfloat16()
    b = torch.randn(4, 8, generator=g).bfloat16()
    ident = Identifier(_ref({("x1", 0): a, ("x2", 0): b, ("x", 1): b}))
    got = ident.identify(a.clone())
    assert got.status == "match" and [(m.key, m.layer) for m in got.matches] == [("x1", 0)]
    assert got.matches[0].max_abs == 0 and got.matches[0].max_ulps == 0
    tie = ident.identify(b.clone())  # x₂⁽⁰⁾ and x⁽¹⁾ are one tensor: both listed, x₂ first
    assert [(m.key, m.layer) for m in tie.matches] == [("x2", 0), ("x", 1)]
    far = ident.identify((a.float() + 0.5 * b.float()).bfloat16())
    assert far.status == "no match" and far.nearest is not None and far.nearest.rel > TOLERANCE["bfloat16"]
    assert ident.identify(torch.zeros(3, 8)).status == "no candidate"
    assert ident.identify(torch.zeros(4, 8, dtype=torch.int64)).status == "no candidate"


def test_float32_value_is_compared_in_the_coarser_dtype() -> None:
    a = torch.randn(4, 8).bfloat16()
    ident = Identifier(_ref({("x1", 0): a}))
    m = ident.identify(a.float() + 1e-4).matches[0]
    assert m.dtype == "bfloat16" and m.key == "x1"


@pytest.mark.slow
def test_peer_capture_is_consistent(tiny_trace) -> None:
    """x₁ = x + Attn, x₂ = x₁ + MLP and x⁽ℓ⁾ = x₂⁽ℓ⁻¹⁾ hold bit for bit in the peer's bf16 capture."""
    t = tiny_trace.trace
    m = {(v["key"], v["layer"]): t.tensor(v["tensor"]) for v in t.math}
    for layer in t.layers():
        assert torch.equal(m[("x1", layer)], m[("x", layer)] + m[("attn", layer)])
        assert torch.equal(m[("x2", layer)], m[("x1", layer)] + m[("mlp", layer)])
        if layer:
            assert torch.equal(m[("x", layer)], m[("x2", layer - 1)])
    assert ("final_norm", t.layers()[-1]) in m
    assert "transformers" in t.meta["reference"]["implementation"]


@pytest.mark.slow
def test_final_hidden_states_agree_with_hf_within_bf16_tolerance(tiny_trace) -> None:
    t = tiny_trace.trace
    f = t.summary["final_vs_hf"]
    assert f["dtype"] == "bfloat16" and f["rel"] < 2 ** -5 and f["scale_ulps"] <= 8
    ret = next(r for r in t.records if r.function == "Qwen3Model.forward" and r.var("return"))
    last = t.layers()[-1]
    peer = next(t.tensor(v["tensor"]) for v in t.math if v["key"] == "final_norm" and v["layer"] == last)
    torch.testing.assert_close(t.tensor(ret.var("return").tensor).float(), peer.float(), rtol=2 ** -5, atol=2 ** -3)
    assert t.flags == []  # bf16: nothing aliases, every flow variable is identified


@pytest.mark.slow
def test_float32_run_is_flagged(tiny_trace_f32) -> None:
    """float32: .float()/.to() return the same tensor, so residual aliases x and is normalised in place."""
    t = tiny_trace_f32.trace
    aliasing = {(f["function"], tuple(f["names"])) for f in t.flags if f["kind"] == "aliasing"}
    assert ("Qwen3DecoderLayer.forward", ("hidden_states", "residual")) in aliasing
    assert ("RMSNorm.add_rms_forward", ("residual", "x")) in aliasing
    assert {f["names"][0] for f in t.flags if f["kind"] == "identity"} >= {"residual", "hidden_states"}
    line = next(s["line"] for s in t.function("Qwen3DecoderLayer.forward")["statements"]
                if "self.post_attention_layernorm(" in s["text"])
    for rec in t.at(QWEN3, line):
        assert ("x1", rec.layer) not in [(m["key"], m["layer"]) for m in rec.var("residual").identity.get("matches", [])]
    assert t.summary["final_vs_hf"]["rel"] > 0.1  # the aliasing makes the whole run wrong, measurably
