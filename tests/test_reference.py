"""annotate.trace.reference: the HF peer's variables and identification by comparison."""
from __future__ import annotations

import pytest
import torch

from annotate.trace.reference import MARGIN, Identifier, MathValue, PeerRun, TOLERANCE, separation

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


def test_a_second_candidate_inside_the_margin_makes_it_ambiguous() -> None:
    """x and x/RMS(x) with token RMS ≈ 1: both within tolerance of the recorded tensor, so no ≡ is claimed."""
    g = torch.Generator().manual_seed(1)
    x = torch.randn(4, 64, generator=g)
    near = x * 1.02   # rel 0.02 from x: inside the bf16 tolerance 2⁻⁴
    ident = Identifier(_ref({("x", 0): x.bfloat16(), ("xhat1", 0): near.bfloat16()}))
    got = ident.identify(near.bfloat16())
    assert got.status == "ambiguous" and {m.key for m in got.matches} == {"x", "xhat1"}
    assert got.matches[0].key == "xhat1" and got.margin is not None and got.margin < MARGIN
    assert got.runner_up is not None and got.runner_up.key == "x"


def test_a_clear_winner_is_a_match_with_its_margin_and_runner_up() -> None:
    g = torch.Generator().manual_seed(2)
    x = torch.randn(4, 64, generator=g)
    xhat = x * 0.4    # token RMS far from 1: rel 0.6 apart
    got = Identifier(_ref({("x", 0): x.bfloat16(), ("xhat1", 0): xhat.bfloat16()})).identify(xhat.bfloat16())
    assert got.status == "match" and [m.key for m in got.matches] == ["xhat1"]
    assert got.runner_up is not None and got.runner_up.key == "x" and got.runner_up.rel > 0.5
    assert got.margin is not None and got.margin >= MARGIN and got.required == MARGIN


def test_the_margin_floor_is_the_tolerance() -> None:
    """A runner-up inside the tolerance never lets a ≡ through, however close the best is."""
    tol = TOLERANCE["bfloat16"]
    assert separation(0.0, 0.99 * tol, tol) < MARGIN <= separation(0.0, 1.01 * tol, tol)
    assert separation(0.02, 0.079, tol) < MARGIN <= separation(0.02, 0.081, tol)


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


@pytest.mark.slow
def test_an_adversarial_checkpoint_says_ambiguous_never_a_match(tmp_path) -> None:
    """Embedding rows scaled to RMS 1, the generated checkpoint's old weakness made exact: x and x/RMS(x)
    are within tolerance of each other, so the normalising lines of both frameworks say "ambiguous"."""
    import json

    from safetensors.torch import save_file

    from annotate.trace import runtime
    from annotate.trace.options import PRESETS
    from annotate.trace.store import load_trace
    from annotate.trace.validate import weak_identity
    from conftest import _need_vendor, run_cli

    _need_vendor()
    cfg = runtime.preset_config(PRESETS["tiny"], 1, "bfloat16")
    weights = runtime.random_state_dict(cfg, 0, torch.bfloat16)
    emb = torch.randn(cfg["vocab_size"], cfg["hidden_size"], generator=torch.Generator().manual_seed(3))
    weights["model.embed_tokens.weight"] = (emb / emb.pow(2).mean(-1, keepdim=True).sqrt()).bfloat16()
    model = tmp_path / "adversarial"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(cfg), encoding="utf-8")
    save_file(weights, str(model / "model.safetensors"), metadata={"format": "pt"})
    rc, _, err = run_cli("trace", "--model", str(model), "--layers", "1", "--tokens", "12", "--out", str(tmp_path / "t"))
    assert rc == 0, err
    t = load_trace(tmp_path / "t")
    norm = next(s["line"] for s in t.function("RMSNorm.rms_forward")["statements"] if "rsqrt" in s["text"])
    var = t.at("nanovllm/layers/layernorm.py", norm, 0)[0].var("x")
    assert var is not None and var.identity["status"] == "ambiguous" and var.matched is None
    assert {m["key"] for m in var.identity["matches"]} >= {"x", "xhat1"}
    hf = [e for e in t.summary["hf_lines"]["lines"]
          if e["layer"] == 0 and e["module"].endswith("input_layernorm") and e["var"] == "hidden_states"]
    assert hf and all(e["status"] == "ambiguous" and not e["label"] for e in hf)
    assert weak_identity(t) is None   # and nothing on the trace claims a ≡ below the margin


def _layered_peer(layers: int, tokens: int = 8, hidden: int = 64) -> tuple[PeerRun, list[torch.Tensor]]:
    """A peer shaped like the real one: per layer x, x/RMS(x), RMSNorm₁, Attn, x₁, …, x₂ (= next x),
    the residual stream growing by an increment per step, and the recorded tensors a framework with
    other rounding would see (each value plus noise, some nearly ambiguous)."""
    g = torch.Generator().manual_seed(7)
    vals: dict[tuple[str, int], torch.Tensor] = {}
    x = torch.randn(tokens, hidden, generator=g)
    for layer in range(layers):
        vals[("x", layer)] = x.bfloat16()
        vals[("xhat1", layer)] = (x / x.pow(2).mean(-1, keepdim=True).sqrt()).bfloat16()
        vals[("ms1", layer)] = x.pow(2).mean(-1, keepdim=True)
        attn = 0.3 * torch.randn(tokens, hidden, generator=g)
        vals[("attn", layer)] = attn.bfloat16()
        x1 = x + attn
        vals[("x1", layer)] = x1.bfloat16()
        mlp = 0.3 * torch.randn(tokens, hidden, generator=g)
        vals[("mlp", layer)] = mlp.bfloat16()
        x = x1 + mlp
        vals[("x2", layer)] = x.bfloat16()
    peer = _ref(vals)
    seen = [(v.float() * (1 + 0.004 * torch.randn(v.shape, generator=g))).to(v.dtype) for v in vals.values()]
    seen += [(vals[("x", 1)].float() * 1.02).bfloat16(), torch.full((tokens, hidden), float("nan")),
             torch.zeros(tokens, hidden), 0.5 * (vals[("x1", 2)].float() + vals[("x2", 2)].float())]
    return peer, seen


def test_the_prefilter_decides_exactly_as_the_full_comparison() -> None:
    """Every identity (status, matches, runner-up, margin) is the same with and without the
    prefilter (forced on here, whatever the size), while it compares fewer candidates in full."""
    from dataclasses import asdict

    peer, seen = _layered_peer(12, 16, 256)
    fast, full = Identifier(peer, prefilter_above=0), Identifier(peer, exhaustive=True)
    for t in seen:
        assert repr(asdict(fast.identify(t))) == repr(asdict(full.identify(t)))   # repr: NaN == NaN
    assert fast.compared < full.compared


def test_the_prefilter_bounds_never_exceed_the_distance() -> None:
    """The fingerprint's bounds are lower bounds of the relative distance, for every candidate."""
    from annotate.trace.reference import TOLERANCE as tol

    peer, seen = _layered_peer(6, 8, 128)
    ident = Identifier(peer)
    for t in seen[:-4]:
        c = ident._stack(tuple(t.shape), torch.bfloat16)
        flat = t.bfloat16().float().reshape(1, -1)
        rel, bounds = ident._rels(c, flat, None), ident._bounds(c, flat)
        assert bool((bounds <= rel).all()) and float(bounds.max()) > 0
        assert ident._needed(rel.tolist(), tol["bfloat16"]) >= float(rel.min())


@pytest.mark.slow
def test_identities_on_a_real_trace_are_unchanged_by_the_prefilter(tiny_trace) -> None:
    """Re-identify every recorded tensor of the tiny trace against its peer with and without the
    prefilter (forced on), and as the trace itself stored them."""
    from dataclasses import asdict

    t = tiny_trace.trace
    peer = PeerRun([MathValue(v["key"], v["layer"], t.tensor(v["tensor"])) for v in t.math], "eager", "test")
    fast, full = Identifier(peer, prefilter_above=0), Identifier(peer, exhaustive=True)
    stored = {v.tensor: v.identity for r in t.records for v in r.vars if v.tensor}
    assert stored
    for key, identity in sorted(stored.items()):
        tensor = t.tensor(key)
        got = asdict(fast.identify(tensor))
        assert repr(got) == repr(asdict(full.identify(tensor))), key
        assert got["status"] == identity["status"], key
        assert [(m["key"], m["layer"]) for m in got["matches"]] == [(m["key"], m["layer"]) for m in identity["matches"]], key
    assert fast.compared < full.compared


@pytest.mark.slow
@pytest.mark.parametrize("fixture", ["tiny_trace", "tiny_trace_f32"])
def test_every_identity_and_margin_of_a_real_trace_is_the_exhaustive_one(fixture: str, request) -> None:
    """The batched path `annotate trace` takes (`identify_many`, the prefilter on by default and
    forced on) against every candidate compared in full, on every recorded copy of a real trace:
    identity by identity, margin by margin, runner-up by runner-up; the bounds it prunes with are
    below every true distance; and it compares far fewer candidates in full."""
    from dataclasses import asdict

    t = request.getfixturevalue(fixture).trace
    peer = PeerRun([MathValue(v["key"], v["layer"], t.tensor(v["tensor"])) for v in t.math], "eager", "test")
    keys = sorted({v.tensor for r in t.records for v in r.vars if v.tensor})
    tensors = [t.tensor(k) for k in keys]
    full = Identifier(peer, exhaustive=True)
    want = [full.identify(x) for x in tensors]
    assert "match" in {w.status for w in want}
    for ident in (Identifier(peer), Identifier(peer, prefilter_above=0)):
        got = ident.identify_many(tensors)
        for key, g, w in zip(keys, got, want):
            assert (g.status, g.margin, g.tolerance) == (w.status, w.margin, w.tolerance), key
            assert [(m.key, m.layer, m.rel) for m in g.matches] == [(m.key, m.layer, m.rel) for m in w.matches], key
            assert (g.runner_up and (g.runner_up.key, g.runner_up.layer)) == (w.runner_up and (w.runner_up.key, w.runner_up.layer)), key
            assert repr(asdict(g)) == repr(asdict(w)), key   # every field, distances included (repr: NaN == NaN)
        assert 0 < ident.compared < full.compared / 3
    prefilter = Identifier(peer, prefilter_above=0)
    for x in tensors:
        prepared = prefilter._prepare(x)
        if prepared is not None and prefilter._prefiltered(prepared[0], prepared[1]):
            c, flat, _ = prepared
            assert bool((prefilter._bounds(c, flat)[0] <= prefilter._rels(c, flat, None)).all())
