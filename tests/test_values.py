"""The values panel (annotate.pages.values) on the committed mini traces: placement, layers, identities, goldens."""
from __future__ import annotations

import re

from annotate.pages.tracefmt import human_bytes, identity_text, nbytes, num, sup_label
from annotate.pages.trace_set import TraceSet, TraceView
from annotate.pages.values import ValuesPanel, brief, unchanged_html

from values_fixtures import compare_golden, mini, mini_set

QWEN3 = "nanovllm/models/qwen3.py"
LAYERNORM = "nanovllm/layers/layernorm.py"


def views(html: str) -> list[tuple[str, str, bool]]:
    """(trace, layer, hidden) of every view in a panel."""
    return [(t, layer, bool(h)) for t, layer, h in
            re.findall(r'<div class="an-view" data-trace="([^"]+)" data-layer="([^"]+)"( hidden)?>', html)]


def view_of(html: str, trace: str, layer: str) -> str:
    """The HTML of one (trace, layer) view of a panel."""
    m = re.search(rf'<div class="an-view" data-trace="{trace}" data-layer="{layer}"( hidden)?>(.*?)<p class="an-prov">',
                  html)
    assert m, (trace, layer)
    return m.group(2)


def test_formatters() -> None:
    assert sup_label("x₁⁽2⁾") == "x₁⁽²⁾" and sup_label("RMSNorm₂(x₁⁽13⁾)") == "RMSNorm₂(x₁⁽¹³⁾)"
    assert num(0.0) == "0" and num(0.078125) == "0.07812" and num(226.45545) == "226.5" and num(None) == "—"
    assert identity_text({"status": "match", "matches": [{"label": "x₁⁽2⁾", "max_abs": 0.0}]}) == "x₁⁽²⁾, max |Δ| = 0"
    assert identity_text({"status": "no candidate"}) == "—"
    assert nbytes([32, 1024], "bfloat16") == 65536 and human_bytes(65536) == "64 KiB"


def test_line_156_has_one_view_per_layer_and_the_identity_of_that_layer() -> None:
    trace = mini()
    html = ValuesPanel(mini_set()).line_html(QWEN3, 156)
    assert html.startswith('<details class="an-values" id="values-L156" data-line="156"')
    assert [(t, layer) for t, layer, _ in views(html)] == [("cpu", str(n)) for n in trace.layers()]
    assert [layer for _, layer, hidden in views(html) if not hidden] == ["1"]     # the ℓ ≥ 1 path by default
    for layer in trace.layers():
        view = view_of(html, "cpu", str(layer))
        res = trace.at(QWEN3, 156, layer=layer)[0].var("residual")
        assert f'data-key="x1" data-layer="{layer}"' in view
        assert f"≡ {sup_label(res.label)}" in view and "max |Δ|" in view
    assert '<select class="an-layer-select">' in html and "an-trace-select" not in html


def test_lines_outside_the_layers_and_branch_lines() -> None:
    panel = ValuesPanel(mini_set())
    outside = panel.line_html(QWEN3, 181)
    assert [(t, layer) for t, layer, _ in views(outside)] == [("cpu", "none")]
    assert "an-layer-select" not in outside and "x₂⁽³⁾" in outside        # `_` ≡ x₂ of the last layer
    branch = panel.line_html(QWEN3, 152)                                     # only layer 0 takes `residual is None`
    assert [layer for _, layer, hidden in views(branch) if not hidden] == ["0"]
    assert branch.count("not executed in layer") == len(mini().layers()) - 1


def test_no_panel_on_untraced_lines_and_none_inside_a_statement() -> None:
    panel = ValuesPanel(mini_set())
    assert panel.line_html(QWEN3, 1) == "" and panel.line_html(QWEN3, 153) == ""
    first = min(s["line"] for s in mini().function("Qwen3DecoderLayer.forward")["statements"])
    assert mini().at(QWEN3, 145)[0].kind == "entry" and first > 146
    assert panel.line_html(QWEN3, 145) == ""                               # the def's signature is not split
    assert 'data-line="145"' in panel.line_html(QWEN3, first - 1)


def test_replay_lines_show_fused_vs_eager_ulps() -> None:
    html = ValuesPanel(mini_set()).line_html(LAYERNORM, 36)
    check = mini().checks_for("RMSNorm.add_rms_forward")
    assert "eager replay" in html and "fused vs eager" in html
    worst = max(o["max_ulps"] for c in check for o in c["outputs"] if c["layer"] == 1)
    assert f"max {worst} ulp" in html


def test_float32_panel_warns_about_aliasing() -> None:
    html = ValuesPanel(mini_set("bf16", "f32")).line_html(LAYERNORM, 38)
    assert '<select class="an-trace-select">' in html
    f32 = view_of(html, "cpu-float32", "1")
    assert "an-warn" in f32 and "residual and x are the same tensor" in f32
    assert "an-warn" not in view_of(html, "cpu", "1")


def test_brief_names_what_the_line_produced() -> None:
    recs = mini().at(QWEN3, 156, layer=2)
    assert brief(recs) == "hidden_states ≡ RMSNorm₂(x₁⁽²⁾) · residual ≡ x₁⁽²⁾"
    assert brief([]) == "未执行 not run"


def test_page_data_and_banner() -> None:
    panel = ValuesPanel(mini_set("bf16", "f32"))
    data = panel.page_data(QWEN3)["values"]
    assert [t["key"] for t in data["traces"]] == ["cpu", "cpu-float32"] and 156 in data["lines"]
    assert panel.page_data("nanovllm/config.py") == {}
    assert "CPU · bfloat16" in panel.banner_html(QWEN3)


def test_stale_files_get_no_panel_and_a_notice() -> None:
    stale = TraceSet([TraceView("cpu", mini(), stale=[QWEN3], changed=[QWEN3])])
    panel = ValuesPanel(stale)
    assert all(panel.line_html(QWEN3, n) == "" for n in range(1, 200))
    assert panel.line_html(LAYERNORM, 36) != ""                           # other files' lines still right
    assert "过期 Stale" in panel.banner_html(QWEN3) and "--force" in panel.banner_html(QWEN3)
    assert stale.warnings() and "traces/cpu" in stale.warnings()[0]


def test_golden_panels() -> None:
    panel = ValuesPanel(mini_set("bf16", "f32"))
    compare_golden("values/qwen3-L156.html", panel.line_html(QWEN3, 156) + "\n")
    compare_golden("values/layernorm-L36.html", panel.line_html(LAYERNORM, 36) + "\n")


def test_a_reused_copy_reads_unchanged_since_the_line_that_took_it(tiny_trace) -> None:
    """In the real tiny trace: `hidden_states` is live through `q, k, v = qkv.split(…)` (a Tensor method
    that writes nothing), so the recorder reused the copy taken after `qkv = self.qkv_proj(…)`."""
    t = tiny_trace.trace
    fn = "Qwen3Attention.forward"
    line = {s["text"].split("(")[0]: s["line"] for s in t.function(fn)["statements"]}
    split = next(r for r in t.records if r.function == fn and r.layer == 0 and "qkv.split(" in r.text)
    hs = split.var("hidden_states")
    first = t.record(hs.same_copy_as["record"])
    assert first.line == line["qkv = self.qkv_proj"] and hs.same_copy_as["var"] == "hidden_states"
    assert hs.tensor is not None and hs.tensor == first.var("hidden_states").tensor   # one copy, stored once
    assert f"unchanged since L{first.line}" in unchanged_html(t, split, hs)
    qkv_line = next(r for r in t.records if r.function == fn and r.layer == 0 and "self.qkv_proj(" in r.text)
    assert qkv_line.var("hidden_states").same_copy_as is None              # after an opaque call: a new copy
    assert unchanged_html(t, qkv_line, qkv_line.var("hidden_states")) == ""
