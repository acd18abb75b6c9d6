"""The 张量并行 page and the rank view of the values panels (annotate.pages.traces.tp_page, values.py), on the
real `--preset tiny --tp 2` trace: every number on the page is the trace's."""
from __future__ import annotations

import re

import pytest

from annotate.pages.traces import tp_page
from annotate.pages.traces.tp_page import slice_label, split_key
from annotate.pages.base.trace_set import TraceSet, TraceView
from annotate.pages.base.tracefmt import num
from annotate.pages.source.values import ValuesPanel, merged_views
from values_fixtures import href, mini_set

pytestmark = pytest.mark.slow
QWEN3, LINEAR = "nanovllm/models/qwen3.py", "nanovllm/layers/linear.py"


@pytest.fixture(scope="module")
def tp_set(tiny_trace_tp2) -> TraceSet:
    return TraceSet([TraceView("cpu-tp2", tiny_trace_tp2.trace)])


def test_split_key() -> None:
    assert split_key("2") == ("2", 0) and split_key("2@1") == ("2", 1) and split_key("none@1") == ("none", 1)


def test_page_states_the_traces_numbers(tp_set, tiny_trace_tp2) -> None:
    page = tp_page.render(tp_set, href)
    par = tiny_trace_tp2.payload["parallel"]
    worst = max(r["scale_ulps"] for r in par["vs_tp1"])
    assert f"**{num(worst, 2)} ulp**" in page
    assert f"**{num(par['bytes']['per_all_reduce'])} B**" in page and "✓ 与轨迹一致 matches the trace" in page
    assert page.count("| 第 ") >= 4   # the all_reduce table: one row per layer
    assert all(f"| 第 {n} 层 layer {n} | 2 |" in page for n in range(4))   # two all_reduces per layer, counted
    assert "&amp;rank=1" in page    # the shapes link to rank 1's panel (an HTML link, escaped)
    assert "✗" not in page
    # every rank header Chinese first: the shapes table's columns and the shards table's first column
    assert "| 秩 rank 0 | 秩 rank 1 |" in page and "<th>秩 rank</th><th>张量 tensor</th>" in page
    assert not re.search(r"\| rank|<th>rank", page)
    # the shard table folded by layer (issue 34 #14): one fold a layer and one outside, each counting its shards
    layers = {s["layer"] for s in par["shards"]}
    assert page.count('<details class="an-tp-layer"') >= len(layers) and "<details class=\"an-tp-layer\" open" not in page
    for layer in layers - {None}:
        n = sum(1 for s in par["shards"] if s["layer"] == layer)
        assert f"第 {layer} 层 layer {layer} · <span class=\"an-fold-count\">{n} 片全部认出 · all {n} shards found" in page


def test_page_without_a_tp_trace_says_how_to_record_one() -> None:
    assert "--tp 2" in tp_page.render(mini_set("bf16"), href)


def test_slice_labels_name_the_identified_slice(tiny_trace_tp2) -> None:
    t = tiny_trace_tp2.trace
    rec = next(r for r in t.ranks[1] if r.function == "Qwen3MLP.forward" and r.layer == 1 and r.var("gate_up"))
    label = slice_label(t, 1, rec, rec.var("gate_up"))
    assert label.startswith("秩 1 / 2 rank 1 of 2: F 列 64–127")   # Chinese first and "matches HF's slice 1" in label
    reduced = next(r for r in t.records if r.function == "RowParallelLinear.forward" and "all_reduce(" in r.text)
    assert "Σ over 2 ranks" in slice_label(t, 0, reduced, reduced.var("y"))
    first = next(r for r in t.records if r.function == "RowParallelLinear.forward" and r.text.startswith("y ="))
    assert "部分和 partial sum" in slice_label(t, 0, first, first.var("y"))


def test_values_scripts_hold_every_rank(tp_set) -> None:
    panel = ValuesPanel(tp_set)
    data = merged_views(panel.data_files(LINEAR), LINEAR, "cpu-tp2")   # the layer scripts, merged as annotate.js does
    t = tp_set.views[0].trace
    partial = next(r.line for r in t.records if r.function == "RowParallelLinear.forward" and r.text.startswith("y ="))
    line = data[str(partial)]
    assert {"0", "1", "0@1", "1@1"} <= set(line)
    assert 'data-rank="1"' in line["1@1"]["h"] and "rank 1 of 2" in line["1@1"]["h"]
    assert "秩 rank 1 / 2" in line["1@1"]["h"]
    panels = "".join(panel.panel(QWEN3, ln) for ln in tp_set.views[0].trace.lines(QWEN3))
    assert panels.count('class="an-rank-select"') == len(tp_set.views[0].trace.lines(QWEN3))
