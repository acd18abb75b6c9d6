"""A course reader's journey through the traced site in a real headless Chromium, from disk (file://).

What a reader needs to understand, follow and cite a value: the panel state in the URL (layer, trace),
the page-wide trace switch remembered by the browser, citations on the clipboard, the keyboard, text
contrast in both themes, tap targets, pages that fit a phone, and a page whose weight does not grow
with the depth of the run. Screenshots are kept under test-artifacts/ (light and dark, 1400×1000 and
390×844).
"""
from __future__ import annotations


from pathlib import Path
from typing import Iterator

import pytest

from annotate.pages.base.tracefmt import num, sup_label
from annotate.render.offline import read_search_index
from annotate.trace.format.store import find_traces, load_trace
from annotate.vendoring.lock import read_lock

from browser_helpers import CONTRAST_JS, PHONE, Visit, visiting

pytest_plugins = ["site_fixtures", "browser_fixtures", "values_fixtures"]
pytestmark = pytest.mark.browser

pytest.importorskip("playwright.sync_api")

QWEN3 = "nanovllm/models/qwen3.py"
PAGE = f"source/{QWEN3}.html"
WIDE = {"width": 1400, "height": 1000}
SCHEMES = ("light", "dark")

@pytest.fixture
def reader(browser, traced_site: Path) -> Iterator[Visit]:
    with visiting(browser, traced_site, WIDE, clipboard=True) as v:
        yield v


def trace_keys(project: Path) -> list[str]:
    """The keys of the traces the site shows (the trace store's own listing: staging folders skipped)."""
    return [p.name for p in find_traces(project)]


def open_panel(v: Visit, line: int, layer: int | str, trace: str | None = None) -> None:
    v.open(PAGE, f"#L{line}&layer={layer}" + (f"&trace={trace}" if trace else ""))
    v.page.wait_for_selector(f"#values-L{line}[open][data-shown]")


def clipboard(v: Visit) -> str:
    return v.page.evaluate("navigator.clipboard.readText()")


# ------------------------------------------------------------------ 1. panels a reader understands

def test_panel_speaks_chinese_first_and_explains_itself(reader: Visit, traced_project: Path, artifacts: Path) -> None:
    trace = load_trace(traced_project / "traces" / "cpu")
    layer = trace.layers()[min(2, len(trace.layers()) - 1)]
    open_panel(reader, 156, layer)
    panel = reader.page.locator("#values-L156")
    # the legend is one folded line above the values; a tap opens what ≡ and ulp mean
    legend = panel.locator("details.an-legend")
    assert "≡ 与 ulp 是什么意思 · what ≡ and ulp mean" in legend.inner_text() and not legend.evaluate("d => d.open")
    legend.locator("summary").click()
    text = panel.inner_text()
    for label in ("赋值 assigned", "与 HF 差 max |Δ|", "怎么读 How to read this", "≡ 表示", "复制引用 Copy citation",
                  "加上注意力增量后的残差流"):
        assert label in text, label
    assert "matches no math variable" not in text
    assert reader.page.eval_on_selector("#values-L156 .an-legend a", "a => a.href").endswith("/values.html")
    panel.scroll_into_view_if_needed()
    reader.page.screenshot(path=str(artifacts / "reader-panel-L156-light.png"))
    assert reader.non_local() == []


# ------------------------------------------------------------------ 2. state in the URL and remembered

def test_url_opens_the_panel_at_that_layer(reader: Visit, traced_project: Path) -> None:
    trace = load_trace(traced_project / "traces" / "cpu")
    for layer in trace.layers():
        open_panel(reader, 156, layer, "cpu")
        assert reader.page.locator("#values-L156 .an-layer-select").input_value() == str(layer)
        ident = reader.page.locator("#values-L156 .an-var[data-var='residual'] .an-id")
        expected = trace.at(QWEN3, 156, layer=layer)[0].var("residual")
        assert ident.get_attribute("data-layer") == str(layer)
        assert ident.inner_text().startswith(f"≡ {sup_label(expected.label)}")
    # changing the layer writes it into the address, and every panel of the page follows
    reader.page.select_option("#values-L156 .an-layer-select", str(trace.layers()[0]))
    assert reader.page.evaluate("location.hash") == f"#L156&layer={trace.layers()[0]}&trace=cpu"
    reader.page.click("#L154 .an-code")
    reader.page.wait_for_selector(f"#values-L154[open][data-shown='cpu/{trace.layers()[0]}']")
    assert reader.page.locator("#values-L154 .an-layer-select").input_value() == str(trace.layers()[0])


def test_flow_diagram_layer_link_opens_that_layer(reader: Visit, traced_project: Path, artifacts: Path) -> None:
    trace = load_trace(traced_project / "traces" / "cpu")
    reader.open("trace/index.html")
    for layer in trace.layers()[-2:]:
        reader.open("trace/index.html")
        link = reader.page.locator(f"svg.an-flow a[href$='#L156&layer={layer}']").first
        assert link.count() == 1
        link.click()
        reader.page.wait_for_selector("#values-L156[open] .an-rec")
        assert reader.page.locator("#values-L156 .an-layer-select").input_value() == str(layer)
        res = reader.page.locator("#values-L156 .an-var[data-var='residual'] .an-id")
        assert res.get_attribute("data-layer") == str(layer)
    reader.page.screenshot(path=str(artifacts / "reader-flow-link-panel.png"))


def test_trace_switch_is_page_wide_and_remembered(reader: Visit, traced_project: Path) -> None:
    keys = trace_keys(traced_project)
    if len(keys) < 2:
        pytest.skip("one trace only: no trace switch")
    reader.open(PAGE)
    assert reader.page.locator(".an-page-trace select").count() == 1         # one switch for the page
    assert reader.page.locator("details.an-values .an-trace-select").count() == 0
    other = reader.page.eval_on_selector_all(".an-page-trace select option", "os => os.map(o => o.value)")[1]
    reader.page.select_option(".an-page-trace select", other)
    reader.page.click("#L156 .an-code")
    reader.page.wait_for_selector("#values-L156[open] .an-rec")
    prov = reader.page.locator("#values-L156 .an-prov").inner_text()
    assert load_trace(traced_project / "traces" / other).provenance() in prov
    reader.page.reload()
    reader.page.wait_for_load_state("load")
    assert reader.page.locator(".an-page-trace select").input_value() == other   # remembered (localStorage)
    reader.page.evaluate("localStorage.clear()")


# ------------------------------------------------------------------ 3. copy a citation

def test_copy_citation_of_a_tensor_line_and_formula(reader: Visit, traced_project: Path, traced_site: Path) -> None:
    trace = load_trace(traced_project / "traces" / "cpu")
    layer = trace.layers()[-1]
    lock = read_lock(traced_project / "vendor" / "nano-vllm.lock.json")
    open_panel(reader, 156, layer)
    reader.page.click("#values-L156 .an-var[data-var='residual'] button.an-cite")
    text = clipboard(reader)
    v = trace.at(QWEN3, 156, layer=layer)[0].var("residual")
    upstream = reader.page.eval_on_selector("#L156", "r => r.getAttribute('data-upstream') || '156'")
    for part in ("第 20 课 · lesson 20", f"{QWEN3}:156 · Qwen3DecoderLayer.forward",
                 f"{lock.upstream.repo.rstrip('/')}/blob/{lock.upstream.commit}/{QWEN3}#L{upstream}",
                 f"residual ≡ {sup_label(v.label)}", f"第 {layer} 层 layer {layer}", f"{list(v.shape)} {v.dtype}",
                 f"‖·‖₂ = {num(v.norm)}", num(v.head[0], 4), "代码 code:", "我的推导 My derivation："):
        assert part in text, (part, text)
    assert "file://" not in text
    # the line bar: a citation for any line, here a range
    reader.open(PAGE, "#L150-L152")
    reader.page.click("#an-linebar button.an-cite")
    text = clipboard(reader)
    assert f"{QWEN3}:150-152" in text and "我的推导" in text and "file://" not in text
    # a note card's formula: its TeX
    card = reader.page.locator("aside.an-note:has(.an-math)").first
    card.locator("button.an-cite").click()
    tex = card.locator(".an-math .katex").get_attribute("aria-label")
    assert f"公式 formula (TeX): {tex}" in clipboard(reader)
    # Ctrl-C on a selection with rendered math gives its TeX, once
    reader.page.evaluate("""() => { const m = document.querySelector('aside.an-note .an-math .katex');
        const r = document.createRange(); r.selectNode(m); const s = getSelection(); s.removeAllRanges(); s.addRange(r); }""")
    reader.page.keyboard.press("Control+c")
    assert clipboard(reader) in (f"$${tex}$$", f"${tex}$")


# ------------------------------------------------------------------ 4. keyboard, contrast, tap targets

def test_keyboard_links_follow_one_tab_stop_per_panel_and_escape(reader: Visit) -> None:
    reader.open(PAGE)
    lns = reader.page.eval_on_selector_all(".an-ln", "ls => ls.map(l => l.getAttribute('tabindex'))")
    assert lns and set(lns) == {"-1"}                                        # no tab stop per line number
    # every tab stop of the code is a panel toggle or a link of a note: none per line
    stops = reader.page.eval_on_selector_all(".an-source :is(a[href], summary, button, select, input, [tabindex])",
                                             "es => es.filter(e => e.tabIndex >= 0 && e.checkVisibility()"
                                             " && !e.closest('.an-note')).length")
    assert stops == reader.page.locator(".an-source details.an-values").count() + reader.page.locator(".an-source a.an-mark").count()
    # Tab from the skip control reaches L156's panel; how many presses it takes is printed for the record
    reader.page.focus(".an-goto input")
    presses = 0
    while presses < 400 and not reader.page.evaluate("document.activeElement.matches('#values-L156 > summary')"):
        reader.page.keyboard.press("Tab")
        presses += 1
    print(f"Tab presses from the skip control to L156's panel: {presses}")
    assert presses < 400, "L156's panel never took focus"
    reader.page.keyboard.press("Enter")
    reader.page.wait_for_selector("#values-L156[open] .an-rec")
    reader.page.wait_for_function("document.querySelector('#values-L156 > summary').getAttribute('aria-expanded') === 'true'")
    reader.page.keyboard.press("Escape")
    assert not reader.page.eval_on_selector("#values-L156", "d => d.open")
    reader.page.wait_for_function("document.querySelector('#values-L156 > summary').getAttribute('aria-expanded') === 'false'")
    assert reader.page.evaluate("document.activeElement.matches('#values-L156 > summary')")   # focus stays on the toggle
    # Enter on a traced line's note marker follows the link (does not open the panel)
    mark = reader.page.locator(".an-row.an-traced a.an-mark").first
    panel = mark.evaluate("a => a.closest('.an-row').getAttribute('data-panel')")
    href = mark.get_attribute("href")
    mark.focus()
    reader.page.keyboard.press("Enter")
    reader.page.wait_for_function(f"location.hash === '{href}'")
    assert not reader.page.eval_on_selector(f"#{panel}", "d => d.open")
    # Enter on a line-number link follows it too, and the address gets the whole state (tests/test_browser_state.py)
    reader.page.focus("#L156 .an-ln")
    reader.page.keyboard.press("Enter")
    full = "#L156&layer=1&trace=cpu"
    reader.page.wait_for_function(f"location.hash === '{full}'")
    assert reader.page.eval_on_selector("#values-L156", "d => d.open")
    # the skip control: go to line 156
    reader.page.fill(".an-goto input", "156")
    reader.page.keyboard.press("Enter")
    reader.page.wait_for_function(f"location.hash === '{full}'")
    assert reader.page.evaluate("document.activeElement.matches('#values-L156 > summary, #L156 .an-ln')")


@pytest.mark.parametrize("scheme", SCHEMES)
def test_text_contrast_and_tap_targets(browser, traced_site: Path, traced_project: Path, scheme: str,
                                       artifacts: Path) -> None:
    with visiting(browser, traced_site, WIDE, scheme) as v:
        open_panel(v, 156, load_trace(traced_project / "traces" / "cpu").layers()[-1])
        v.open(PAGE, "#L156")                                                 # highlighted, panel still open
        v.page.wait_for_selector("#L156.an-hl")
        v.page.wait_for_selector("#values-L156[open] .an-rec")
        if not v.page.locator(".an-id.an-no-match").count():                 # the default trace may match all
            v.page.evaluate("""() => { const h = document.querySelector('#values-L156 .an-var-head');
                h.insertAdjacentHTML('beforeend', '<span class="an-id an-no-match" id="probe">无匹配 no match</span>'); }""")
        checks = {"annotated line number": ".an-row.an-noted > .an-ln", "self on a highlighted line": "#L156 .bp",
                  "values tag": ".an-values-tag", "no match": ".an-id.an-no-match", "line number": ".an-row > .an-ln",
                  "legend": "#values-L156 .an-legend", "role": "#values-L156 .an-role", "stats": "#values-L156 .an-stats"}
        ratios = {name: round(v.page.eval_on_selector(sel, CONTRAST_JS), 2) for name, sel in checks.items()}
        print(f"contrast ({scheme}):", ratios)
        low = {k: r for k, r in ratios.items() if r < 4.5}
        assert not low, f"{scheme}: contrast below 4.5:1: {low}"
        sizes = {sel: v.page.eval_on_selector(sel, "e => { const r = e.getBoundingClientRect(); return [r.width, r.height]; }")
                 for sel in (".an-note-head .an-upstream", "a.an-mark", "#values-L156 button.an-cite",
                             "#values-L156 > summary")}
        small = {s: wh for s, wh in sizes.items() if min(wh) < 24}
        assert not small, f"tap targets under 24×24 px: {small}"
        v.page.locator("#values-L156").scroll_into_view_if_needed()
        v.page.screenshot(path=str(artifacts / f"reader-contrast-{scheme}.png"))


# ------------------------------------------------------------------ 5. phones

# no page wider than a phone: tests/test_browser_layout.py (it shares the layout tests' tour of every page)


def test_range_link_shows_the_range_on_a_phone(browser, traced_site: Path, artifacts: Path) -> None:
    with visiting(browser, traced_site, PHONE) as v:
        v.open(PAGE, "#L150-L152")
        v.page.wait_for_selector("#L150.an-hl")
        assert v.in_viewport("#L150") and v.in_viewport("#L152")
        v.page.screenshot(path=str(artifacts / "reader-phone-range.png"))


# ------------------------------------------------------------------ 8. weight independent of depth

def test_source_page_weight_does_not_carry_the_values(traced_site: Path, traced_project: Path) -> None:
    html = (traced_site / PAGE).read_text(encoding="utf-8")
    size = len(html.encode())
    print(f"{PAGE}: {size} bytes")
    assert size < 400_000
    assert 'class="an-rec"' not in html                                     # the views are in the scripts
    layers = len(load_trace(traced_project / "traces" / "cpu").layers())
    assert html.count("<option") <= html.count("an-layer-select") + len(trace_keys(traced_project))
    for key in trace_keys(traced_project):   # one script per (trace, layer): layer 0's is there for every trace
        assert (traced_site / f"source/{QWEN3}.values-{key}.L0.js").is_file()
    assert layers >= 1


def test_panel_loads_its_trace_script_only_when_opened(reader: Visit) -> None:
    reader.open(PAGE)
    assert not [u for u in reader.requests if ".values-" in u]
    reader.page.click("#L156 .an-code")
    reader.page.wait_for_selector("#values-L156[open] .an-rec")
    assert [u for u in reader.requests if u.endswith(".values-cpu.L1.js")]   # that trace's layer, only


# ------------------------------------------------------------------ the walk

def test_reader_walk_index_to_a_cited_value(reader: Visit, traced_project: Path, artifacts: Path) -> None:
    """index → lesson → a value the lesson cites → the panel at that layer → copy its citation."""
    trace = load_trace(traced_project / "traces" / "cpu")
    reader.open("index.html")
    reader.page.click("article a[href='lesson.html']")
    reader.page.wait_for_url("**/lesson.html")
    cited = reader.page.locator(".an-cited-value a[href*='#L156&layer=2']").first
    res = trace.at(QWEN3, 156, layer=2)[0].var("residual")
    assert f"= {num(res.norm)}" in cited.evaluate("a => a.parentElement.textContent")   # the recorded number
    cited.click()
    reader.page.wait_for_selector("#values-L156[open] .an-rec")
    assert reader.page.locator("#values-L156 .an-layer-select").input_value() == "2"
    assert reader.page.locator("#values-L156 .an-var[data-var='residual'] .an-id").get_attribute("data-layer") == "2"
    reader.page.locator("#values-L156").scroll_into_view_if_needed()
    reader.page.screenshot(path=str(artifacts / "reader-walk.png"))
    reader.page.click("#values-L156 .an-var[data-var='residual'] button.an-cite")
    text = clipboard(reader)
    assert f"residual ≡ {sup_label(res.label)}" in text and "第 2 层" in text and "我的推导" in text
    assert reader.non_local() == []


def test_lesson_opens_on_content_on_a_phone(browser, traced_site: Path, artifacts: Path) -> None:
    with visiting(browser, traced_site, PHONE) as v:
        v.open("lesson.html")
        assert not v.page.eval_on_selector("article details.info", "d => d.open")   # provenance folded
        assert v.in_viewport(".an-lesson-lead")
        # previous / next in reading order: lesson → its diagrams → the three-framework map → the first annotated file
        for page, after in (("lesson.html", "diagrams.html"), ("diagrams.html", "map.html"),
                            ("map.html", "source/nanovllm/models/qwen3.py.html")):
            v.open(page)
            assert v.page.get_attribute("a.md-footer__link--next", "href").endswith(after), page
        v.open("lesson.html")
        v.page.screenshot(path=str(artifacts / "reader-phone-lesson-top.png"))


@pytest.mark.parametrize("scheme", SCHEMES)
def test_flow_diagram_and_plots_are_legible_on_a_phone(browser, traced_site: Path, scheme: str, artifacts: Path) -> None:
    with visiting(browser, traced_site, PHONE, scheme) as v:
        v.open("trace/index.html")
        smallest = v.page.evaluate("""() => Math.min(...Array.from(document.querySelectorAll('svg.an-flow text'),
            t => parseFloat(getComputedStyle(t).fontSize) * t.getScreenCTM().a))""")
        assert smallest >= 11, f"flow diagram text {smallest:.1f} px"
        lanes = v.page.evaluate("""() => { const f = document.querySelector('.an-flow-figure').getBoundingClientRect();
            const xs = Array.from(document.querySelectorAll('svg.an-flow line[x1]'), l => l.getBoundingClientRect().x);
            return [Math.min(...xs) >= f.left, Math.max(...xs) <= f.right]; }""")
        assert lanes == [True, True], "both lanes in view"
        dark = "-dark" if scheme == "dark" else ""                             # the scheme's own rendering
        for img in (f"norms{dark}.svg", f"hf-diff{dark}.svg"):                # plots at their own size, scrolled
            w = v.page.eval_on_selector(f"img[src='{img}']", "i => [i.getBoundingClientRect().width, i.naturalWidth]")
            assert w[0] >= w[1] - 1
        v.page.locator("svg.an-flow").scroll_into_view_if_needed()
        v.page.screenshot(path=str(artifacts / f"reader-phone-flow-{scheme}.png"))


def test_search_indexes_math_once_as_text(traced_site: Path) -> None:
    docs = read_search_index(traced_site)["docs"]
    text = " ".join(d["text"] for d in docs if d["location"].split("#")[0] in ("index.html", "lesson.html"))
    assert "\\mathrm" not in text and "x_1 =" not in text                  # no raw TeX
    flow = next(d["text"] for d in docs if d["location"] == "index.html#the-two-variable-residual-flow")
    assert flow.count("MLP(RMSNorm₂") == 1                                  # the formula once, as Unicode text


@pytest.mark.parametrize("words", ["residual", "残差", "RMSNorm", "SwiGLU"])
def test_search_for_the_lessons_own_words_ranks_it_first(reader: Visit, words: str) -> None:
    """"residual" ranked the lesson 9th of 14 (the experiments and the numerics page say it more often, and the
    lesson's title said it only in Chinese): the lesson leads for its words in both languages."""
    reader.open("index.html")
    reader.page.focus("input.md-search__input")
    reader.page.keyboard.type(words)
    reader.page.wait_for_selector(".md-search-result__item", timeout=30_000)
    reader.page.wait_for_timeout(300)   # the worker answers per keystroke: let the last answer land
    hrefs = reader.page.eval_on_selector_all("a.md-search-result__link", "as => as.map(a => a.getAttribute('href'))")
    assert hrefs and "lesson.html" in hrefs[0], hrefs[:12]


def test_a_search_hit_on_a_note_lands_at_its_line(reader: Visit, traced_site: Path) -> None:
    docs = read_search_index(traced_site)["docs"]
    notes = [d for d in docs if d["location"].startswith(f"{PAGE}#L") and "<code>" in d["title"]]
    assert notes and all("复制引用" not in d["text"] for d in notes)        # each card its own entry, text only
    hit = next(d for d in notes if "add_rms_forward" in d["text"] or "融合" in d["text"])
    anchor = hit["location"].split("#")[1]                                   # the note's line(s): L154 or L145-L158
    reader.open(PAGE, "#" + anchor)
    first = anchor.split("-")[0]
    reader.page.wait_for_selector(f"#{first}.an-hl")
    assert reader.in_viewport(f"#{first}")


@pytest.mark.parametrize("viewport", [WIDE, PHONE], ids=["desktop", "phone"])
def test_a_value_cited_in_the_lesson_copies_its_citation(browser, traced_site: Path, traced_project: Path,
                                                         viewport: dict) -> None:
    """The lesson's {{value}} numbers carry 引用 cite: lesson and framework, file:line, the upstream permalink
    at the pinned commit, the tensor, and the trace the number came from."""
    trace = load_trace(traced_project / "traces" / "cpu")
    res = trace.at(QWEN3, 156, layer=2)[0].var("residual")
    upstream = read_lock(traced_project / "vendor" / "nano-vllm.lock.json").upstream.file_url(QWEN3)
    with visiting(browser, traced_site, viewport, clipboard=True) as v:
        v.open("lesson.html")
        value = v.page.locator(".an-cited-value:has(a[href*='#L156&layer=2'])").first
        value.scroll_into_view_if_needed()
        button = value.locator("button.an-cite")
        assert button.is_visible() and button.bounding_box()["x"] + button.bounding_box()["width"] <= viewport["width"]
        button.click()
        v.page.wait_for_function("b => b.textContent.includes('已复制')", arg=button.element_handle())
        lines = clipboard(v).splitlines()
        assert lines[0].endswith("· nano-vllm") and lines[1].startswith(f"位置 where: {QWEN3}:156")
        assert lines[2].startswith(f"上游 upstream: {upstream}#L")
        assert f"residual ≡ {sup_label(res.label)} · 第 2 层 layer 2 · ‖·‖₂ = {num(res.norm)}" in lines[3]
        assert lines[4].startswith("运行 trace: ") and trace.provenance() in lines[4] and lines[-1].startswith("我的推导")


@pytest.mark.parametrize("viewport", [WIDE, PHONE], ids=["desktop", "phone"])
def test_a_lesson_formula_and_a_diagram_cell_copy_their_citations(browser, traced_site: Path, traced_project: Path,
                                                                   viewport: dict) -> None:
    """The RMSNorm formula's 引用 copies lesson, section, TeX and the vendored code (file:line, permalink);
    a selected diagram cell's 引用 copies the diagram, the cell, its value, its formula and the code; a
    counterexample's, its claim, right against wrong values and the code it ran."""
    upstream = read_lock(traced_project / "vendor" / "nano-vllm.lock.json").upstream.file_url("nanovllm/layers/layernorm.py")
    with visiting(browser, traced_site, viewport, clipboard=True) as v:
        v.open("lesson.html")
        cite = v.page.locator(".an-formula-cite[data-cite-text*='RMSNorm.rms_forward']").first
        cite.scroll_into_view_if_needed()
        button = cite.locator("button.an-cite")
        box = button.bounding_box()
        assert button.is_visible() and box["x"] >= 0 and box["x"] + box["width"] <= viewport["width"]
        button.click()
        v.page.wait_for_function("b => b.textContent.includes('已复制')", arg=button.element_handle())
        lines = clipboard(v).splitlines()
        assert lines[0].endswith("· nano-vllm") and lines[1].startswith("页面 page: ") and "§ 5. RMSNorm" in lines[1]
        assert lines[2].startswith("公式 formula (TeX): \\operatorname{RMSNorm}(x)")
        assert any(x.startswith("实现 code: nanovllm/layers/layernorm.py:") and x.endswith("· RMSNorm.rms_forward") for x in lines)
        assert any(x.startswith(f"上游 upstream: {upstream}#L") for x in lines) and lines[-1].startswith("我的推导")

        v.open("diagrams.html")
        cell = v.page.locator(".dg-diagram[data-diagram='swiglu'] button.dg-cell[data-cell^='out.']").first
        cell.scroll_into_view_if_needed()
        cell.click()
        out = v.page.locator("#dg-swiglu-formula")
        button = out.locator("button.an-cite")
        button.scroll_into_view_if_needed()
        box = button.bounding_box()
        assert button.is_visible() and box["x"] + box["width"] <= viewport["width"]
        formula = out.evaluate("o => o.firstChild.textContent")
        button.click()
        v.page.wait_for_function("b => b.textContent.includes('已复制')", arg=button.element_handle())
        lines = clipboard(v).splitlines()
        assert lines[1].startswith("图解 diagram: SwiGLU") and lines[1].endswith("(diagrams.md#swiglu)")
        assert lines[2].startswith("元素 cell: out ") and f"{cell.get_attribute('data-cell')} = " in lines[2]
        assert lines[3] == f"算式 formula: {formula}" and formula
        assert lines[4].startswith("实现 code: nanovllm/models/qwen3.py:") and lines[4].endswith("· Qwen3MLP.forward")
        assert lines[5].startswith("上游 upstream: https://") and lines[-1].startswith("我的推导")

        relu = v.page.locator(".dg-ce[data-ce='relu']")
        relu.locator(".dg-ce-toggle").click()
        button = relu.locator(".dg-ce-cite button.an-cite")
        button.scroll_into_view_if_needed()
        box = button.bounding_box()
        assert button.is_visible() and box["x"] + box["width"] <= viewport["width"]
        button.click()
        v.page.wait_for_function("b => b.textContent.includes('已复制')", arg=button.element_handle())
        lines = clipboard(v).splitlines()
        number = relu.get_attribute("data-number")
        assert lines[2].startswith(f"反例 counterexample: 反例 {number}：") and "对比 compared:" in lines
        assert any(x.startswith("  ") and "正确 right " in x and "| 错误 wrong " in x for x in lines)
        assert any(x.endswith("· Qwen3MLP.forward") for x in lines) and lines[-1].startswith("我的推导")
