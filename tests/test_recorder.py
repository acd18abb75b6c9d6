"""annotate.trace.record.recorder: what residual / hidden_states held after each line, replayed compiled
bodies, the compiled-ran-compiled check, aliasing and kernel capture — on one real compiled trace."""
from __future__ import annotations

import gc
import json

import pytest
import torch

from annotate.trace.model import runtime
from conftest import ROOT, _need_vendor

QWEN3 = "nanovllm/models/qwen3.py"
pytestmark = pytest.mark.slow


def line_of(trace, function: str, needle: str) -> int:
    """The one statement of `function` whose text contains `needle` (found in the trace, not hard-coded)."""
    lines = [s["line"] for s in trace.function(function)["statements"] if needle in s["text"]]
    assert len(lines) == 1, (function, needle, lines)
    return lines[0]


def keys(var) -> list[tuple[str, int]]:
    return [(m["key"], m["layer"]) for m in var.identity.get("matches", [])]


def only(records):
    assert len(records) == 1, records
    return records[0]


def test_residual_after_post_attention_layernorm_is_x1_every_layer(tiny_trace) -> None:
    t = tiny_trace.trace
    line = line_of(t, "Qwen3DecoderLayer.forward", "self.post_attention_layernorm(")
    assert t.layers() == [0, 1, 2, 3]
    for layer in t.layers():
        v = only(t.at(QWEN3, line, layer=layer)).var("residual")
        assert keys(v)[0] == ("x1", layer), v.identity


def test_layer_returns_the_mlp_increment_not_x2(tiny_trace) -> None:
    t = tiny_trace.trace
    line = line_of(t, "Qwen3DecoderLayer.forward", "return hidden_states, residual")
    for layer in t.layers():
        rec = only(t.at(QWEN3, line, layer=layer))
        assert keys(rec.var("return[0]")) == [("mlp", layer)]
        assert ("x2", layer) not in keys(rec.var("hidden_states"))
        assert keys(rec.var("return[1]"))[0] == ("x1", layer)


def test_residual_after_input_layernorm_is_the_previous_x2(tiny_trace) -> None:
    t = tiny_trace.trace
    line = line_of(t, "Qwen3DecoderLayer.forward", "self.input_layernorm(hidden_states, residual)")
    for layer in t.layers()[1:]:
        rec = only(t.at(QWEN3, line, layer=layer))
        assert keys(rec.var("residual"))[0] == ("x2", layer - 1)
        assert keys(rec.var("hidden_states"))[0] == ("rmsnorm1", layer)
    assert t.at(QWEN3, line, layer=0) == []  # layer 0 takes the `residual is None` branch


def test_underscore_in_model_forward_is_the_last_x2(tiny_trace) -> None:
    t = tiny_trace.trace
    rec = only(t.at(QWEN3, line_of(t, "Qwen3Model.forward", "hidden_states, _ = self.norm(")))
    last = t.layers()[-1]
    assert keys(rec.var("_"))[0] == ("x2", last)
    assert keys(rec.var("hidden_states"))[0] == ("final_norm", last)


def _replay(t, module: str) -> dict[str, object]:
    """The replayed add_rms_forward records of one module, by statement text."""
    recs = [r for r in t.records if r.function == "RMSNorm.add_rms_forward" and r.module == module]
    assert recs and all(r.source == "replay" for r in recs)
    return {("entry" if r.kind == "entry" else r.text): r for r in recs}


def test_replayed_add_rms_forward_gives_sum_rounded_residual_and_normalised_output(tiny_trace) -> None:
    t = tiny_trace.trace
    module = "model.layers.1.post_attention_layernorm"
    by = _replay(t, module)
    x_in, res_in = (t.tensor(by["entry"].var(n).tensor) for n in ("x", "residual"))
    total = t.tensor(by["x = x.float().add_(residual.float())"].var("x").tensor)
    assert total.dtype == torch.float32 and torch.equal(total, x_in.float() + res_in.float())
    rounded = t.tensor(by["residual = x.to(orig_dtype)"].var("residual").tensor)
    assert rounded.dtype == torch.bfloat16 and torch.equal(rounded, total.to(torch.bfloat16))
    cfg = t.meta["model"]["config"]
    weight = runtime.random_state_dict(cfg, t.meta["seed"], torch.bfloat16)[f"{module}.weight"]
    normed = total * torch.rsqrt(total.pow(2).mean(dim=-1, keepdim=True) + cfg["rms_norm_eps"])
    out = t.tensor(by["x = x.to(orig_dtype).mul_(self.weight)"].var("x").tensor)
    assert torch.equal(out, normed.to(torch.bfloat16).mul_(weight))


def test_fused_vs_eager_distance_is_recorded_for_every_compiled_call(tiny_trace) -> None:
    t = tiny_trace.trace
    calls = t.meta["compiled"]["compiled_calls"]
    for fn in ("RMSNorm.rms_forward", "RMSNorm.add_rms_forward", "SiluAndMul.forward", "RotaryEmbedding.forward"):
        checks = t.checks_for(fn)
        assert len(checks) == calls[fn] > 0
        assert all(o["max_ulps"] <= 2 for c in checks for o in c["outputs"])
    # the rounded residual is the same bits fused or not; the normalised output may differ by an ulp
    assert all(c["outputs"][1]["max_ulps"] == 0 for c in t.checks_for("RMSNorm.add_rms_forward"))


def test_compiled_paths_ran_compiled(tiny_trace) -> None:
    c = tiny_trace.trace.meta["compiled"]
    assert c["ran_compiled"] and c["eager_escapes"] == {}
    assert c["dynamo_first_run"]["unique_graphs"] >= 4 and c["dynamo_while_recording"]["unique_graphs"] == 0
    assert c["recording_changed_output"] is False
    # <= 3.11: later calls were proved compiled by Inductor's graph count, after the tracer vouched
    # for it; 3.12+ (the GPU image) never sets the tracer aside, so no count is trusted there
    # (that path is simulated in test_graphs.py on 3.11)
    import annotate.trace.record.recorder as recorder_mod

    trusted = c["graph_count_trusted"]
    assert set(trusted) == set(c["compiled_calls"])
    assert all(trusted.values()) if recorder_mod._SUSPEND else not any(trusted.values())


def test_copies_are_shared_and_the_report_says_how_many(tiny_trace) -> None:
    r = tiny_trace.trace.meta["recorder"]
    assert r["copies_taken"] > 0 and r["copies_reused"] > 0 and r["views_of_copies"] > 0
    assert f"{r['copies_taken']} taken; {r['copies_reused']} reused" in tiny_trace.stdout
    t = tiny_trace.trace
    shared = [(rec, v) for rec in t.records for v in rec.vars if v.same_copy_as]
    assert shared
    for rec, v in shared:     # a reused copy was taken earlier, by a record that names it the same way
        first = t.record(v.same_copy_as["record"])
        assert first.order < rec.order and first.var(v.same_copy_as["var"]) is not None


def test_an_eager_fallback_is_detected() -> None:
    """Negative control: with Dynamo forced eager, the original bodies run and are counted as escapes."""
    _need_vendor()
    from annotate.trace.record.recorder import Recorder

    rt = runtime.build_runtime(runtime.TraceOptions(preset="tiny", layers=1, tokens=3, root=ROOT))
    mods = runtime.import_vendored(ROOT, "cpu")
    rec = Recorder(rt.model, mods, runtime.vendor_root(ROOT))
    assert gc.isenabled()
    with torch.compiler.set_stance("force_eager"), rec.recording():
        collecting_inside = gc.isenabled()
        runtime.run_prefill(rt)
    rt.close()
    assert rec.escapes.get("RMSNorm.rms_forward", 0) > 0 and not rec.ran_compiled()
    assert not collecting_inside and gc.isenabled()   # the collector is off while recording, then back


def test_kernel_source_of_each_compiled_function_is_captured(tiny_trace) -> None:
    t = tiny_trace.trace
    for fn in ("RMSNorm.rms_forward", "RMSNorm.add_rms_forward", "SiluAndMul.forward", "RotaryEmbedding.forward"):
        mods = t.kernels_for(fn)
        assert mods and all(m["this_run"] for m in mods)
        assert all(k["language"] == "cpp" and 'extern "C"' in k["source"] for m in mods for k in m["kernels"])


def test_views_are_aliases_but_not_the_same_memory(tiny_trace) -> None:
    t = tiny_trace.trace
    rec = t.at(QWEN3, line_of(t, "Qwen3Attention.forward", "qkv.split("), layer=0)[0]
    q = rec.var("q")
    assert "qkv" in q.aliases and q.same_memory == []


def test_values_are_clones_taken_after_each_line(tiny_trace_f32) -> None:
    """float32: residual IS x inside add_rms_forward, so x.mul_ normalises it in place — the
    recorded value after `residual = …` must still be the sum, the one after x.mul_ the normalised one."""
    by = _replay(tiny_trace_f32.trace, "model.layers.0.post_attention_layernorm")
    t = tiny_trace_f32.trace
    after_assign = by["residual = x.to(orig_dtype)"]
    after_mul = by["x.mul_(torch.rsqrt(var + self.eps))"]
    assert "x" in after_assign.var("residual").same_memory
    before, later = (t.tensor(r.var("residual").tensor) for r in (after_assign, after_mul))
    assert not torch.equal(before, later)
    assert torch.equal(later, t.tensor(after_mul.var("x").tensor))


def test_bandwidth_timing_runs_on_this_device(tmp_path) -> None:
    """The timing the GPU check uses (fused vs eager vs copy), exercised on CPU with a small shape."""
    _need_vendor()
    from annotate.trace.reports import bandwidth

    result = bandwidth.measure(ROOT, device="cpu", tokens=64, hidden=64, repeats=3, calls=4, warmup=2)
    assert result["bytes_moved"] == (4 * 64 * 64 + 64) * 2
    assert result["method"]["timer"] == "time.perf_counter around the loop"
    assert (result["method"]["repeats"], result["method"]["calls_per_repeat"]) == (3, 4)
    for timing in result["seconds_per_call"].values():
        assert len(timing["repeats"]) == 3 and timing["min"] <= timing["median"] <= timing["max"]
    copy_bw = result["bytes_moved"] / result["median_s"]["copy"] / 1e9
    assert result["bandwidth_GBps"]["copy"] == pytest.approx(copy_bw)
    assert result["fraction_of_copy"]["fused"] == pytest.approx(result["median_s"]["copy"] / result["median_s"]["fused"])
    assert set(result["median_s"]) == {"fused", "eager", "copy"} and all(v > 0 for v in result["median_s"].values())
    assert result["fused_vs_eager"]["residual"]["max_ulps"] == 0 and result["fused_vs_eager"]["x"]["max_ulps"] <= 2
    with pytest.raises(ValueError, match="in place"):
        bandwidth.measure(ROOT, device="cpu", dtype="float32", tokens=8, hidden=8, repeats=1, calls=1)
    with pytest.raises(ValueError, match="at least 1"):
        bandwidth.measure(ROOT, device="cpu", tokens=8, hidden=8, calls=0)


def records_structure(payload: dict) -> str:
    """A trace's records as one line each, timings and values aside: where (function, file, line,
    kind, source, layer, module, call, hit, order) and, per variable, its name, role, shape, dtype,
    shared copy and aliases — every field the recorder decides, none it measures."""
    lines = []
    for r in payload["records"]:
        head = [r[k] for k in ("id", "function", "file", "line", "end_line", "kind", "source", "layer", "module",
                               "call", "hit", "order")]
        vars_ = [[v[k] for k in ("name", "role", "shape", "dtype", "aliases", "same_memory", "same_copy_as")]
                 for v in r["vars"]]
        lines.append(json.dumps([head, vars_, r["aliases"]], ensure_ascii=False, separators=(",", ":")))
    return "\n".join(lines) + "\n"


def test_records_are_those_the_unoptimised_recorder_made(tiny_trace) -> None:
    """The tiny trace's records, field by field (values and timings aside), as the recorder recorded
    them before its fixed costs were cut (golden written from that code; its values were compared
    byte for byte then)."""
    from goldens import compare_golden

    compare_golden("recorder/tiny-records.jsonl", records_structure(tiny_trace.payload), redacted=False)
