"""HF transformers' own lines under the same line recorder: each live variable identified by comparison."""
from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from annotate.anchors import Anchor, resolve
from annotate.errors import UserError
from annotate.pages.base.snapshot import build_snapshot
from annotate.notes import Sources
from annotate.framework_map import load_map
from annotate.pages.lesson.map_page import render_map
from annotate.pages.base.trace_set import TraceSet, TraceView
from annotate.trace.identify.hf_lines import HF_FILE, HF_LOCK, installed_file
from annotate.trace.format.store import load_trace

REPO = Path(__file__).resolve().parents[1]
LAYER = "Qwen3DecoderLayer.forward"


def line_of(statement: str, nth: int = 0, symbol: str = LAYER) -> int:
    return resolve(Anchor(HF_FILE, symbol, statement, nth), Sources(REPO).get(HF_FILE)).span[0]


def held(hf: dict, line: int, var: str) -> dict[int, str]:
    return {e["layer"]: e["identity"] for e in hf["lines"] if e["line"] == line and e["var"] == var}


def test_hf_lines_are_identified_by_comparison(tiny_trace) -> None:
    hf = tiny_trace.payload["summary"]["hf_lines"]
    assert hf["skipped"] == "" and hf["file"] == HF_FILE
    layers = range(tiny_trace.payload["meta"]["model"]["layers"])
    x1, x2 = line_of("hidden_states = residual + hidden_states", 0), line_of("hidden_states = residual + hidden_states", 1)
    assert held(hf, x1, "hidden_states") == {n: "x1" for n in layers}
    assert held(hf, x1, "residual") == {n: ("x" if n == 0 else "x2") for n in layers}   # x(ℓ) is x₂(ℓ−1)
    assert held(hf, x2, "hidden_states") == {n: "x2" for n in layers}
    assert held(hf, line_of("hidden_states = self.post_attention_layernorm(hidden_states)"), "hidden_states") == {
        n: "rmsnorm2" for n in layers}
    assert all(e["max_abs"] == 0.0 for e in hf["lines"] if e["identity"])   # HF against itself: exact
    assert all(e["shape"] and e["head"] and e["norm"] > 0 for e in hf["lines"])   # what the panel shows
    text = json.dumps(hf)
    assert "residual + hidden_states" not in text   # no statement text in the trace


def test_map_shows_nano_vllm_and_hf_lines_that_hold_x1(tiny_trace) -> None:
    traces = TraceSet([TraceView("cpu", load_trace(tiny_trace.out, REPO))])
    html = render_map(load_map(REPO), build_snapshot(REPO), traces=traces).markdown
    row = re.search(r'<tr data-math="x1">.*?</tr>', html).group(0)
    nano = resolve(Anchor("nanovllm/models/qwen3.py", LAYER,
                          "hidden_states, residual = self.post_attention_layernorm(hidden_states, residual)"),
                   Sources(REPO).get("nanovllm/models/qwen3.py")).span[0]
    assert f"qwen3.py:{nano}</a> <code>residual</code>" in row
    assert f"modeling_qwen3.py:{line_of('hidden_states = residual + hidden_states')}</a> <code>hidden_states</code>" in row
    assert re.search(r"ℓ0: [0-9.e-]+ \([0-9.]+ ulp\)", row)


def test_an_installed_transformers_other_than_the_pin_is_refused(tmp_path: Path) -> None:
    (tmp_path / "vendor").mkdir()
    lock = json.loads((REPO / HF_LOCK).read_text(encoding="utf-8"))
    lock["source"]["files"][HF_FILE] = "0" * 64
    (tmp_path / HF_LOCK).write_text(json.dumps(lock), encoding="utf-8")
    version = lock["source"]["version"]      # installed here: its file is not what this lock records
    with pytest.raises(UserError, match=rf"the installed transformers=={re.escape(version)} has other bytes "
                                        r"than the vendored pin .*; reinstall it$"):
        installed_file(tmp_path)
    lock["source"]["version"] = "0.0.1"
    (tmp_path / HF_LOCK).write_text(json.dumps(lock), encoding="utf-8")
    with pytest.raises(UserError, match=rf"the installed transformers \({re.escape(version)}\) is not the vendored "
                                        r"pin .*; install transformers==0\.0\.1 as pinned$"):
        installed_file(tmp_path)
    base, sha = installed_file(REPO)
    assert (base / HF_FILE).is_file() and sha == json.loads((REPO / HF_LOCK).read_text())["source"]["files"][HF_FILE]


def test_hf_page_panels_follow_the_recorded_bytes(tiny_trace, tmp_path: Path) -> None:
    from annotate.pages.source.hf_values import HfValues

    traces = TraceSet([TraceView("cpu", load_trace(tiny_trace.out, REPO))])
    files = build_snapshot(REPO).files
    panels = HfValues(traces, files)
    line = line_of("hidden_states = residual + hidden_states")
    html = panels.line_html(HF_FILE, line)
    assert f'<details class="an-values an-hf-values" id="values-L{line}"' in html and 'data-layer="1"' in html
    assert "hidden_states ≡ x₁⁽¹⁾" in html and "x₁⁽1⁾" not in html and "值 values" in html
    assert panels.line_html("nanovllm/models/qwen3.py", line) == ""
    # HF's vendored file changes (a vendor update): the recorded lines are shown nowhere
    edited = {**files, HF_FILE: replace(files[HF_FILE], data=b"# edited\n")}
    assert HfValues(traces, edited).by_line == {}
    assert HfValues(traces, {k: v for k, v in files.items() if k != HF_FILE}).by_line == {}   # not vendored at all


def test_map_and_hf_page_show_the_same_trace_when_the_default_has_no_hf_lines(tiny_trace) -> None:
    from annotate.pages.source.hf_values import HfValues

    from values_fixtures import mini

    with_hf = load_trace(tiny_trace.out, REPO)
    plain = mini()
    plain.summary.pop("hf_lines", None)   # as a trace recorded with HF's lines skipped
    traces = TraceSet([TraceView("mini", plain), TraceView("cpu", with_hf)])   # the default has no hf_lines
    assert plain.provenance() != with_hf.provenance()
    facts = build_snapshot(REPO)
    html = render_map(load_map(REPO), facts, traces=traces).markdown
    panels = HfValues(traces, facts.files)
    line = line_of("hidden_states = residual + hidden_states")
    assert [v.trace for v, _ in panels.shown] == [with_hf] and f'id="values-L{line}"' in panels.line_html(HF_FILE, line)
    assert f"**Trace:** {with_hf.provenance()}" in html and "HF's lines were not traced" not in html
    assert f"modeling_qwen3.py:{line}</a> <code>hidden_states</code>" in html
    # neither shows HF's lines once today's vendored HF file is other bytes than they were recorded from
    edited = replace(facts, files={**facts.files, HF_FILE: replace(facts.files[HF_FILE], data=b"# edited\n")})
    assert HfValues(traces, edited.files).by_line == {}
    assert "recorded against other bytes" in render_map(load_map(REPO), edited, traces=traces).markdown


def test_hf_rows_are_measured_against_the_nano_vllm_tensor_of_the_same_variable(tiny_trace) -> None:
    """HF's x₁ (`hidden_states = residual + hidden_states`) meets nano-vllm's `residual` after
    post_attention_layernorm, found because both were identified as x₁⁽ℓ⁾; the distance is measured."""
    hf = tiny_trace.payload["summary"]["hf_lines"]
    nano_line = resolve(Anchor("nanovllm/models/qwen3.py", LAYER,
                               "hidden_states, residual = self.post_attention_layernorm(hidden_states, residual)"),
                        Sources(REPO).get("nanovllm/models/qwen3.py")).span[0]
    x1 = line_of("hidden_states = residual + hidden_states")
    rows = [e for e in hf["lines"] if e["line"] == x1 and e["var"] == "hidden_states"]
    assert rows and all((e["nano"]["file"], e["nano"]["line"], e["nano"]["var"], e["nano"]["layer"]) ==
                        ("nanovllm/models/qwen3.py", nano_line, "residual", e["layer"]) for e in rows)
    nano_vars = {(r["layer"], v["name"]): v for r in tiny_trace.payload["records"]
                 if r["file"] == "nanovllm/models/qwen3.py" and r["line"] == nano_line for v in r["vars"]}
    for e in rows:   # |‖a‖ − ‖b‖| ≤ ‖a − b‖ ≤ √n · max |a − b| (+ rounding to the coarser dtype): consistent norms
        n = e["nano"]
        numel = e["shape"][0] * e["shape"][1]
        gap = abs(e["norm"] - nano_vars[(e["layer"], "residual")]["norm"])
        assert n["max_abs"] >= 0 and gap <= numel ** 0.5 * n["max_abs"] + 0.01 * e["norm"]
        assert n["rel"] < tiny_trace.payload["meta"]["reference"]["tolerance_rel_l2"]["bfloat16"]
    # a row no nano-vllm tensor matches (q_norm's per-head shapes) names none
    assert all(e["nano"] is None for e in hf["lines"] if e["status"] != "match")
