"""annotate.trace.identify.reference: the HF peer's variables and identification by comparison."""
from __future__ import annotations

import pytest
import torch

from annotate.trace.identify.reference import (MARGIN, TOKEN_FACTOR, TOLERANCE, CallContext, Identifier, MathValue, PeerRun,
                                      call_context, separation)

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

    from annotate.trace.model import runtime
    from annotate.trace.model.options import PRESETS
    from annotate.trace.format.store import load_trace
    from annotate.trace.format.validate import weak_identity
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
    contexts = [None] + [call_context(n, f"model.layers.{n}.{m}") for n in (1, 2) for m in ("input_layernorm", "mlp")]
    for t in seen:
        for ctx in contexts:
            assert repr(asdict(fast.identify(t, ctx))) == repr(asdict(full.identify(t, ctx)))   # repr: NaN == NaN
    assert fast.compared < full.compared
    many = fast.identify_many(seen, [contexts[1]] * len(seen))   # batched as `annotate trace` does
    assert [repr(asdict(g)) for g in many] == [repr(asdict(full.identify(t, contexts[1]))) for t in seen]


def _all_scores(ident: Identifier, t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """`t`'s score against every candidate of its shape (the full comparison) and the prefilter's bounds."""
    pool = ident._pool(tuple(t.shape), t.dtype, t.device)
    flats = ident._flats(pool, [t])
    scored = ident._score_pairs(pool, flats, [(0, r) for r in range(len(pool.values))])
    return torch.tensor([s.score for s in scored], dtype=torch.float64), ident._bounds(pool, flats)[0]


def test_the_prefilter_bounds_never_exceed_the_distance() -> None:
    """The prefilter's bounds are lower bounds of the score, for every candidate."""
    peer, seen = _layered_peer(6, 8, 128)
    ident = Identifier(peer)
    for t in seen[:-4]:
        scores, bounds = _all_scores(ident, t)
        assert bool((bounds <= scores).all()) and float(bounds.max()) > 0
        assert ident._needed(scores.tolist()) >= float(scores.min())


def test_a_candidate_that_differs_token_by_token_is_told_apart() -> None:
    """Over the whole tensor one token of large norm decides; a candidate that agrees there but differs
    by 30 % at every other token is within the whole-tensor tolerance (rule 1: ambiguous) and far by
    its worst token (rule 2: a ≡ with the margin)."""
    g = torch.Generator().manual_seed(4)
    x = torch.randn(8, 64, generator=g)
    x[0] *= 40.0
    other = x.clone()
    other[1:] *= 1.3
    ident = Identifier(_ref({("x", 0): x.bfloat16(), ("x1", 0): other.bfloat16()}))
    seen = (x * (1 + 0.003 * torch.randn(x.shape, generator=g))).bfloat16()
    got = ident.identify(seen)
    tol = TOLERANCE["bfloat16"]
    assert got.status == "match" and [m.key for m in got.matches] == ["x"]
    assert got.runner_up is not None and got.runner_up.key == "x1"
    assert got.runner_up.rel < tol < got.runner_up.token_rel / TOKEN_FACTOR   # close over the tensor, not per token
    assert got.margin is not None and got.margin >= MARGIN and got.matches[0].token_rel < tol


def test_float32_candidates_are_compared_in_float32_with_the_runs_tolerance() -> None:
    """A float32 mean of squares against the peer's float32 one: measured in float32 (rule 1 rounded both
    to the peer's bf16), with the tolerance of the bf16 run its inputs came from."""
    g = torch.Generator().manual_seed(5)
    x = torch.randn(6, 32, generator=g)
    ms = x.pow(2).mean(-1, keepdim=True)
    ident = Identifier(_ref({("x", 0): x.bfloat16(), ("ms1", 0): ms}))
    got = ident.identify(ms * (1 + 1e-4))
    assert got.status == "match" and got.matches[0].dtype == "float32" and got.tolerance == TOLERANCE["bfloat16"]
    assert 0 < got.matches[0].rel < 2e-4   # bf16 rounding alone would put it ~10× farther


def _norm_peer() -> tuple[PeerRun, torch.Tensor]:
    """mean(x²) of a deep layer's two norms as a 28-layer run has them: mean((x₁⁽¹⁹⁾)²) and mean((x⁽²⁰⁾)²)
    2.4 % apart, and the value nano-vllm's input_layernorm of layer 20 computed (drift 0.5 %)."""
    g = torch.Generator().manual_seed(6)
    ms = 1 + torch.rand(16, 1, generator=g)
    before = ms * (1 + 0.024 * torch.randn(16, 1, generator=g))
    peer = _ref({("ms2", 19): before, ("ms1", 20): ms, ("x", 20): torch.randn(16, 8, generator=g).bfloat16()})
    return peer, ms * (1 + 0.005 * torch.randn(16, 1, generator=g))


def test_the_call_breaks_a_tie_among_its_own_candidates_only() -> None:
    """The comparison alone leaves mean((x⁽²⁰⁾)²) and mean((x₁⁽¹⁹⁾)²) ambiguous; in input_layernorm of layer
    20 only the first is a candidate, so the call decides (the other is kept in `outside`); in any other
    call the ambiguity stays, and a call never pulls a tensor towards a candidate that is not its nearest."""
    peer, seen = _norm_peer()
    ident = Identifier(peer)
    assert ident.identify(seen).status == "ambiguous"
    got = ident.identify(seen, call_context(20, "model.layers.20.input_layernorm"))
    assert got.status == "match" and [(m.key, m.layer) for m in got.matches] == [("ms1", 20)]
    assert got.context == {"layer": 20, "norm": "1"} and [(m.key, m.layer) for m in got.outside] == [("ms2", 19)]
    for other in (call_context(20, "model.layers.20.post_attention_layernorm"), call_context(19, "model.layers.19.mlp")):
        assert ident.identify(seen, other).status == "ambiguous" and ident.identify(seen, other).context is None
    far = peer.get("ms2", 19) * 1.001   # nearest: a candidate outside the call; stays what it is
    assert ident.identify(far, call_context(20, "model.layers.20.input_layernorm")).matches[0].key == "ms2"
    assert call_context(None, "model.norm") == CallContext(None, "f") and call_context(3, "model.layers.3").norm is None


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
    checked = 0
    for x in tensors:
        if not x.is_floating_point() or tuple(x.shape) not in prefilter._shapes:
            continue
        pool = prefilter._pool(tuple(x.shape), x.dtype, x.device)
        flats = prefilter._flats(pool, [x])
        if prefilter._prefiltered(pool, flats[:, 0]):
            bounds = prefilter._bounds(pool, flats)[0].tolist()
            scores = prefilter._score_pairs(pool, flats, [(0, r) for r in range(len(pool.values))])
            # a bound of the whole-tensor distance over the tolerance: never above the score it bounds
            assert all(b <= s.score for b, s in zip(bounds, scores)), x.shape
            checked += 1
    assert checked


@pytest.mark.slow
def test_at_full_depth_every_mean_of_squares_is_its_own_norms(tmp_path) -> None:
    """The 28-layer ambiguity (layernorm.py:37 var: mean(x₁²) and mean(x₂²) within the margin of each other in the
    H200's layers 7–27, rule 1, 40 of them at 28 layers × 32 tokens) on this CPU: the 0.6B shape at 28 layers and
    32 tokens decides every identity. Each mean of
    squares recorded inside a norm's call is that norm's own value in that layer, found by comparison with every
    candidate (the call only breaks a tie its own candidates win), and nothing is left ambiguous."""
    from conftest import run_cli
    from annotate.trace.format.store import load_trace

    rc, _, err = run_cli("trace", "--preset", "qwen3-0.6b", "--layers", "28", "--tokens", "32",
                           "--out", str(tmp_path / "t"))
    assert rc == 0, err
    trace = load_trace(tmp_path / "t")
    assert trace.meta["reference"]["rule"] == 2 and len(trace.layers()) == 28
    statuses: dict[str, int] = {}
    norms_seen = 0
    for rec in trace.records:
        for var in rec.vars:
            identity = var.identity
            statuses[identity["status"]] = statuses.get(identity["status"], 0) + 1
            if rec.file.endswith("layernorm.py") and var.name == "var" and rec.layer is not None:
                which = {"input_layernorm": "ms1", "post_attention_layernorm": "ms2"}.get((rec.module or "").rsplit(".", 1)[-1])
                if which is None:   # the final norm: its own value msf, checked by the ambiguity count below
                    continue
                assert identity["status"] == "match", (rec.line, rec.layer, rec.module, identity)
                assert (identity["matches"][0]["key"], identity["matches"][0]["layer"]) == (which, rec.layer)
                norms_seen += 1
    assert statuses.get("ambiguous", 0) == 0, statuses
    assert norms_seen >= 2 * 28 - 1   # both norms of every layer (layer 0's first norm has no residual add)
