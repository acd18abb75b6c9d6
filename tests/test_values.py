"""The values panel (annotate.pages.source.values) on the committed mini traces: placement, layers, identities, goldens."""
from __future__ import annotations


from annotate.pages.base.tracefmt import human_bytes, identity_text, nbytes, num, sup_label
from annotate.pages.base.trace_set import TraceSet, TraceView
from annotate.pages.source.values import ValuesPanel, brief, kind_words, merged_views, script_uri, unchanged_html

from goldens import compare_golden
from values_fixtures import mini, mini_set

QWEN3 = "nanovllm/models/qwen3.py"
LAYERNORM = "nanovllm/layers/layernorm.py"


def views(panel: ValuesPanel, path: str, start: int) -> dict[tuple[str, str], str]:
    """(trace, layer) -> the HTML of that view of the panel at `start`, read from the values scripts the
    page ships (:meth:`ValuesPanel.data_files`): the tests look at what the reader's browser gets."""
    keys = [t["key"] for t in panel.page_data(path)["values"]["traces"]]
    return {(trace, layer): view["h"] for trace in keys
            for layer, view in script_data(panel, path, trace).get(str(start), {}).items()}


def script_data(panel: ValuesPanel, path: str, trace: str) -> dict:
    """What the layer scripts of `trace` merge into `window.anValues[trace]` (line -> view key -> view)."""
    return merged_views(panel.data_files(path), path, trace)


def test_formatters() -> None:
    assert sup_label("x₁⁽2⁾") == "x₁⁽²⁾" and sup_label("RMSNorm₂(x₁⁽13⁾)") == "RMSNorm₂(x₁⁽¹³⁾)"
    assert num(0.0) == "0" and num(0.078125) == "0.07812" and num(226.45545) == "226.5" and num(None) == "—"
    assert identity_text({"status": "match", "matches": [{"label": "x₁⁽2⁾", "max_abs": 0.0}]}) == "x₁⁽²⁾, 与 HF 差 max |Δ| = 0"
    assert identity_text({"status": "no candidate"}) == "—"
    assert nbytes([32, 1024], "bfloat16") == 65536 and human_bytes(65536) == "64 KiB"


def test_line_156_has_one_view_per_layer_and_the_identity_of_that_layer() -> None:
    trace = mini()
    panel = ValuesPanel(mini_set())
    html = panel.line_html(QWEN3, 156)
    assert html.startswith('<details class="an-values" id="values-L156" data-line="156" data-trace="cpu" data-layer="1"')
    assert "an-rec" not in html                                              # the views are in the script, not the page
    assert '<select class="an-layer-select"><option value="1" selected>' in html and "an-trace-select" not in html
    got = views(panel, QWEN3, 156)
    assert sorted(got) == [("cpu", str(n)) for n in trace.layers()]
    data = script_data(panel, QWEN3, "cpu")
    for layer in trace.layers():
        view = got[("cpu", str(layer))]
        assert data["156"][str(layer)]["b"] == brief(trace, trace.at(QWEN3, 156, layer=layer))   # the brief beside each view
        res = trace.at(QWEN3, 156, layer=layer)[0].var("residual")
        assert f'data-key="x1" data-layer="{layer}"' in view
        assert f"≡ {sup_label(res.label)}" in view and "与 HF 差 max |Δ|" in view
        assert "加上注意力增量后的残差流" in view and "赋值 assigned" in view         # in words, Chinese first
        assert f"位置 where: 第 {layer} 层 layer {layer}" in view                   # the tensor's citation names its layer


def test_lines_outside_the_layers_and_branch_lines() -> None:
    panel = ValuesPanel(mini_set())
    outside = views(panel, QWEN3, 181)
    assert list(outside) == [("cpu", "none")]
    assert "an-layer-select" not in panel.line_html(QWEN3, 181) and "x₂⁽³⁾" in outside[("cpu", "none")]
    assert 'data-layer="0"' in panel.line_html(QWEN3, 152)                   # only layer 0 takes `residual is None`
    branch = views(panel, QWEN3, 152)
    assert sum("not executed in layer" in h for h in branch.values()) == len(mini().layers()) - 1


def test_no_panel_on_untraced_lines_and_none_inside_a_statement() -> None:
    panel = ValuesPanel(mini_set())
    assert panel.line_html(QWEN3, 1) == "" and panel.line_html(QWEN3, 153) == ""
    first = min(s["line"] for s in mini().function("Qwen3DecoderLayer.forward")["statements"])
    assert mini().at(QWEN3, 145)[0].kind == "entry" and first > 146
    assert panel.line_html(QWEN3, 145) == ""                               # the def's signature is not split
    assert 'data-line="145"' in panel.line_html(QWEN3, first - 1)


def test_replay_lines_show_fused_vs_eager_ulps() -> None:
    view = views(ValuesPanel(mini_set()), LAYERNORM, 36)[("cpu", "1")]
    check = mini().checks_for("RMSNorm.add_rms_forward")
    assert "eager 重放 replay" in view and "fused vs eager" in view
    worst = max(o["max_ulps"] for c in check for o in c["outputs"] if c["layer"] == 1)
    assert f"max {worst} ulp" in view


def test_float32_panel_warns_about_aliasing_and_says_why_there_is_no_match() -> None:
    got = views(ValuesPanel(mini_set("bf16", "f32")), LAYERNORM, 38)
    f32 = got[("cpu-float32", "1")]
    assert "an-warn" in f32 and "residual and x are the same tensor" in f32
    assert "无匹配：别名 no match: aliasing" in f32
    # the nearest candidate is named only within rel 0.5; past it (an unrelated tensor) the words say so
    x = next(r for r in mini("f32").at(LAYERNORM, 38, layer=1)).var("x")
    assert x is not None and x.identity["status"] == "no match"
    near = x.identity["nearest"]["rel"]
    assert ("最接近 nearest" in f32) == (near <= 0.5) and ("no candidate within rel 0.5" in f32) == (near > 0.5)
    assert "an-warn" not in got[("cpu", "1")]


def test_no_match_names_its_nearest_candidate_only_within_the_bound() -> None:
    far = {"status": "no match", "nearest": {"label": "x₂⁽3⁾", "rel": 1.1}, "tolerance": 0.0625}
    near = {"status": "no match", "nearest": {"label": "x₂⁽3⁾", "rel": 0.2}, "tolerance": 0.0625}
    assert identity_text(far) == "无匹配 no match"
    assert identity_text(near) == "无匹配 no match（最接近 nearest x₂⁽³⁾, rel 0.2）"


def test_rmsnorms_own_steps_are_identified_with_their_margin() -> None:
    got = views(ValuesPanel(mini_set("bf16", "f32")), LAYERNORM, 38)       # x.mul_(rsqrt(...)): x/RMS(x), before γ
    bf = got[("cpu", "1")]
    assert "≡ x⁽¹⁾/RMS(x⁽¹⁾)" in bf and "归一化后、乘 γ 之前" in bf and "an-no-match" not in bf
    assert "次近 runner-up" in bf and "裕度 margin" in bf and "需 ≥ 4 required" in bf
    var = views(ValuesPanel(mini_set("bf16")), LAYERNORM, 37)[("cpu", "1")]   # var = x.pow(2).mean(...)
    assert "≡ mean((x⁽¹⁾)²)" in var


def test_intermediates_are_labelled_not_warned_about() -> None:
    import dataclasses

    trace = mini()
    rec = trace.at(QWEN3, 156, layer=2)[0]
    inside = dataclasses.replace(rec.vars[0], name="gate_up", identity={"status": "no match", "tolerance": 0.0625})
    assert kind_words(rec, inside, trace)[0] == "中间量 intermediate"   # a value inside a step: no ≡, no warning
    f32 = views(ValuesPanel(mini_set("bf16", "f32")), QWEN3, 157)[("cpu-float32", "1")]
    assert "无匹配 no match" in f32 and ("最接近 nearest" in f32 and "容差 tolerance" in f32   # the flow variables: why
                                         or "no candidate within rel 0.5" in f32)


def test_brief_names_what_the_line_produced() -> None:
    recs = mini().at(QWEN3, 156, layer=2)
    assert brief(mini(), recs) == "hidden_states ≡ RMSNorm₂(x₁⁽²⁾) · residual ≡ x₁⁽²⁾"
    assert brief(mini(), []) == "未执行 not run"


def test_the_brief_names_an_aliased_tensor_as_the_opened_panel_does() -> None:
    panel = ValuesPanel(mini_set("f32"))
    summary = panel.line_html(LAYERNORM, 38)               # float32: x is residual, overwritten in place
    opened = views(panel, LAYERNORM, 38)[("cpu-float32", "1")]
    assert 'data-layer="1"' in summary and "x: 无匹配：别名 no match: aliasing" in summary
    assert "中间量 intermediate" not in summary
    assert script_data(panel, LAYERNORM, "cpu-float32")["38"]["1"]["b"] in summary  # the script's brief is the page's
    head = opened.split('data-var="x"', 1)[1].split("</div>", 1)[0]
    assert "无匹配：别名 no match: aliasing" in head and "中间量" not in head


def test_page_data_and_banner() -> None:
    panel = ValuesPanel(mini_set("bf16", "f32"))
    data = panel.page_data(QWEN3)["values"]
    assert [t["key"] for t in data["traces"]] == ["cpu", "cpu-float32"] and 156 in data["lines"]
    assert [t["base"] for t in data["traces"]] == ["qwen3.py.values-cpu", "qwen3.py.values-cpu-float32"]
    assert [t["layers"] for t in data["traces"]] == [len(mini().layers()), len(mini("f32").layers())]
    assert [t["tp"] for t in data["traces"]] == [1, 1]
    assert data["layers"] == mini().layers()
    assert panel.page_data("nanovllm/config.py") == {}
    banner = panel.banner_html(QWEN3)
    assert "CPU · bfloat16" in banner and "运行（全页）Trace, whole page" in banner   # one page-wide trace switch
    assert 'href="../../../values.html"' in banner and '<template id="an-panel-template">' in banner
    # two scripts per (trace, layer): its views (L) and only their summary lines (B, what folded panels show);
    # the trace's own layers, and outside them where qwen3.py ran there
    layers = [str(n) for n in mini().layers()] + ["none"]
    files = panel.data_files(QWEN3)
    assert set(files) == {f"source/nanovllm/models/qwen3.py.values-{key}.{part}{layer}.js"
                          for key in ("cpu", "cpu-float32") for layer in layers for part in "LB"}
    brief = files["source/nanovllm/models/qwen3.py.values-cpu.B0.js"]
    assert "window.anBriefs" in brief and '"h":' not in brief            # summary lines only, no views
    assert len(brief) < len(files["source/nanovllm/models/qwen3.py.values-cpu.L0.js"]) / 2
    assert script_uri(QWEN3, "cpu", "none") == "source/nanovllm/models/qwen3.py.values-cpu.Lnone.js"


def test_stale_files_get_no_panel_and_a_notice() -> None:
    stale = TraceSet([TraceView("cpu", mini(), stale=[QWEN3], changed=[QWEN3])])
    panel = ValuesPanel(stale)
    assert all(panel.line_html(QWEN3, n) == "" for n in range(1, 200))
    assert panel.line_html(LAYERNORM, 36) != ""                           # other files' lines still right
    assert "过期 Stale" in panel.banner_html(QWEN3) and "--force" in panel.banner_html(QWEN3)
    assert stale.warnings() and "traces/cpu" in stale.warnings()[0]


def test_golden_panels() -> None:
    panel = ValuesPanel(mini_set("bf16", "f32"))
    for name, path, line in (("qwen3-L156", QWEN3, 156), ("layernorm-L36", LAYERNORM, 36)):
        got = views(panel, path, line)
        text = panel.line_html(path, line) + "\n" + "".join(f"\n<!-- {t} / {k} -->\n{h}\n" for (t, k), h in sorted(got.items()))
        compare_golden(f"values/{name}.html", text)


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


def test_call_and_pass_shown_only_when_they_vary() -> None:
    """`第 1 次调用 call 1 · 第 1 遍 pass 1` in every panel told the reader nothing: each count is shown
    only when the panel's records differ in it."""
    from types import SimpleNamespace

    from annotate.pages.source.values import call_varies

    rec = lambda call, hit: SimpleNamespace(call=call, hit=hit)  # noqa: E731
    assert call_varies([rec(0, 0), rec(0, 0)]) == (False, False)
    assert call_varies([rec(0, 0), rec(1, 0)]) == (True, False)
    assert call_varies([rec(0, 0), rec(0, 1)]) == (False, True)


def test_a_copy_from_another_function_names_its_file_and_says_why() -> None:
    """`即 L50 的 return[0]` named no file (the page's own L50 is another line) and explained itself only
    in a tooltip: the visible words name file:line, which return value, and why it is the same copy."""
    from types import SimpleNamespace

    from annotate.pages.source.values import same_copy_text

    first = SimpleNamespace(file="nanovllm/layers/layernorm.py", line=50, module="model.layers.1.input_layernorm",
                            function="RMSNorm.forward")
    text = same_copy_text(first, "return[0]")
    assert "layernorm.py:50" in text and "第 1 个返回值" in text and "return value 1" in text
    assert "不可能改写" in text and "no code in between could write" in text and "即 L50" not in text
