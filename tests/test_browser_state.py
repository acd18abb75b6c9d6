"""One page, one state, in a real headless Chromium on the built site (file://), phone and desktop.

What the reader sees agrees with itself: every folded summary shows the page's layer and trace (or
no identity until that trace's data has loaded); the address holds the whole state and wins over the
remembered trace; each open panel names its layer and trace with a trace switch beside it; Esc acts
only on the panel that holds the focus; the line bar never sits on the panel it opened, names no line
that does not exist, reads a reversed range forwards and survives a malformed escape; line references
never break inside their number.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from annotate.pages.base.trace_set import TraceView
from annotate.pages.source.values import brief
from annotate.trace.format.store import Trace, find_traces, load_trace

from browser_helpers import CHROMIUM, PHONE, Visit, visiting

pytest_plugins = ["site_fixtures", "browser_fixtures", "values_fixtures"]
pytestmark = pytest.mark.browser

pytest.importorskip("playwright.sync_api")

QWEN3 = "nanovllm/models/qwen3.py"
PAGE = f"source/{QWEN3}.html"
HF_PAGE = "source/transformers/models/qwen3/modeling_qwen3.py.html"
WIDE = {"width": 1400, "height": 1000}
LOADING = "加载中… loading…"

# every folded panel: (line, data-brief, summary text, has a layer switch)
SUMMARIES_JS = """() => [...document.querySelectorAll('details.an-values')].map(p => [
  +p.dataset.line, p.getAttribute('data-brief'), p.querySelector('.an-brief').textContent,
  !!p.querySelector('.an-layer-select')])"""


@pytest.fixture
def reader(browser, traced_site: Path) -> Iterator[Visit]:
    with visiting(browser, traced_site, WIDE, clipboard=True) as v:
        yield v


def traces(project: Path) -> dict[str, Trace]:
    """The traces the site shows, by key (the trace store's own listing)."""
    return {p.name: load_trace(p) for p in find_traces(project)}


def other_trace(project: Path) -> tuple[str, Trace]:
    """A trace of qwen3.py other than `cpu`, float32 first (the one whose identities differ most)."""
    found = [(k, t) for k, t in traces(project).items() if k != "cpu" and t.lines(QWEN3)]
    if not found:
        pytest.skip("one trace only: no trace switch")
    return sorted(found, key=lambda kt: kt[1].meta["dtype"] != "float32")[0]


def expected_brief(trace: Trace, line: int, layer: int) -> str:
    """The summary line of `line` in `layer` of `trace`, as the build writes it."""
    return brief(trace, [r for r in trace.at(QWEN3, line) if r.layer == layer])


def wait_summaries(v: Visit, key: str) -> list[list]:
    """Every summary, once every panel with a layer switch shows trace `key` (none still loading)."""
    v.page.wait_for_function(f"""() => [...document.querySelectorAll('details.an-values')]
        .filter(p => p.querySelector('.an-layer-select'))
        .every(p => (p.getAttribute('data-brief') || '').startsWith({key!r} + '/'))""")
    return v.page.evaluate(SUMMARIES_JS)


def assert_summaries(rows: list[list], trace: Trace, key: str, layer: int) -> None:
    """Each layered panel's summary is the one of that trace and layer."""
    checked = 0
    for line, shown, text, layered in rows:
        if not layered or not trace.at(QWEN3, line):
            continue
        assert shown == f"{key}/{layer}", (line, shown)
        assert text == expected_brief(trace, line, layer), (line, text)
        checked += 1
    assert checked > 5


# ------------------------------------------------------------------ 1. folded summaries agree with the page

def test_every_summary_follows_the_layer_and_the_trace(reader: Visit, traced_project: Path) -> None:
    cpu = load_trace(traced_project / "traces" / "cpu")
    layer = cpu.layers()[-1]
    reader.open(PAGE, f"#L156&layer={layer}&trace=cpu")
    rows = wait_summaries(reader, "cpu")
    assert_summaries(rows, cpu, "cpu", layer)
    key, other = other_trace(traced_project)
    # right after the switch, before that trace's data is in, a summary names no identity at all
    now = reader.page.evaluate("""key => { const s = document.querySelector('.an-page-trace select');
        s.value = key; s.dispatchEvent(new Event('change', {bubbles: true}));
        return [...document.querySelectorAll('details.an-values:not([open])')]
          .filter(p => p.querySelector('.an-layer-select'))
          .map(p => [p.getAttribute('data-brief'), p.querySelector('.an-brief').textContent]); }""", key)
    assert now and all(b == "loading" and t == LOADING or (b or "").startswith(key + "/") for b, t in now), now
    rows = wait_summaries(reader, key)
    assert_summaries(rows, other, key, layer if layer in other.layers() else int(rows[0][1].split("/")[1]))
    assert reader.page.locator("details.an-values:not([open]) .an-brief", has_text=LOADING).count() == 0
    assert reader.non_local() == []


# ------------------------------------------------------------------ 2. the whole state in the address

def test_every_change_writes_the_address_and_a_reload_shows_the_same(reader: Visit, traced_project: Path) -> None:
    key, _ = other_trace(traced_project)
    cpu = load_trace(traced_project / "traces" / "cpu")
    reader.open(PAGE)
    reader.page.evaluate("localStorage.clear()")
    reader.page.select_option(".an-page-trace select", key)                # the banner's switch
    assert reader.page.evaluate("location.hash") == f"#layer=1&trace={key}"
    reader.page.click("#L156 .an-ln")                                       # a line number
    reader.page.wait_for_function(f"location.hash === '#L156&layer=1&trace={key}'")
    reader.page.wait_for_selector(f"#values-L156[open][data-shown='{key}/1']")
    before = reader.page.evaluate(SUMMARIES_JS)
    reader.page.reload()
    reader.page.wait_for_load_state("load")
    assert reader.page.evaluate("location.hash") == f"#L156&layer=1&trace={key}"
    reader.page.wait_for_selector(f"#values-L156[open][data-shown='{key}/1']")
    assert reader.page.locator(".an-page-trace select").input_value() == key
    wait_summaries(reader, key)
    assert reader.page.evaluate(SUMMARIES_JS) == before
    # the address wins over the remembered choice, which then follows it
    layer = cpu.layers()[-1]
    reader.page.goto("about:blank")
    reader.open(PAGE, f"#L156&layer={layer}&trace=cpu")
    reader.page.wait_for_selector(f"#values-L156[open][data-shown='cpu/{layer}']")
    assert reader.page.evaluate("localStorage.getItem('annotate.trace')") == "cpu"
    assert reader.page.locator(".an-page-trace select").input_value() == "cpu"
    # the goto form, a keyboard-opened panel, the layer switch: each writes the whole state
    reader.page.fill(".an-goto input", "150")
    reader.page.keyboard.press("Enter")
    reader.page.wait_for_function(f"location.hash === '#L150&layer={layer}&trace=cpu'")
    reader.page.focus("#values-L154 > summary")
    reader.page.keyboard.press("Enter")
    reader.page.wait_for_function(f"location.hash === '#L154&layer={layer}&trace=cpu'")
    reader.page.select_option("#values-L154 .an-layer-select", "0")
    assert reader.page.evaluate("location.hash") == "#L154&layer=0&trace=cpu"
    reader.page.click("#L158 .an-ln", modifiers=["Shift"])                 # a shift-click range
    assert reader.page.evaluate("location.hash") == "#L154-L158&layer=0&trace=cpu"


def test_lesson_link_sets_the_state_the_reload_keeps(reader: Visit, traced_project: Path) -> None:
    key, _ = other_trace(traced_project)
    reader.open("lesson.html")
    reader.page.evaluate(f"localStorage.setItem('annotate.trace', {key!r})")
    link = reader.page.locator(".an-cited-value a[href*='#L156&layer=2']").first
    if link.count() == 0:
        pytest.skip("the lesson cites no value of L156 in layer 2 here")
    link.click()
    reader.page.wait_for_selector("#values-L156[open][data-shown='cpu/2']")
    assert reader.page.evaluate("location.hash") == "#L156&layer=2&trace=cpu"
    assert reader.page.evaluate("localStorage.getItem('annotate.trace')") == "cpu"
    rows = wait_summaries(reader, "cpu")
    assert_summaries(rows, load_trace(traced_project / "traces" / "cpu"), "cpu", 2)


# ------------------------------------------------------------------ 3. the header names layer and trace

@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_panel_header_names_layer_and_trace_with_the_switch_beside_it(browser, traced_site: Path, traced_project: Path,
                                                                      scheme: str, artifacts: Path) -> None:
    key, _ = other_trace(traced_project)
    label = {k: TraceView(k, t).label for k, t in traces(traced_project).items()}
    with visiting(browser, traced_site, WIDE, scheme) as v:
        v.open(PAGE, "#L156&layer=2&trace=cpu")
        v.page.wait_for_selector("#values-L156[open][data-shown='cpu/2']")
        state = v.page.locator("#values-L156 > summary .an-values-state")
        # no rank words under a one-rank trace; the label may name the shape where another trace reads alike
        assert state.is_visible() and state.inner_text().startswith(f"第 2 层 layer 2 · 运行 trace {label['cpu']}")
        assert "rank" not in state.inner_text()
        switch = v.page.locator("#values-L156 .an-values-controls .an-trace-select")
        assert switch.is_visible() and switch.input_value() == "cpu"
        head, box = state.bounding_box(), switch.bounding_box()
        assert head and box and 0 <= box["y"] - head["y"] < 200                # beside the layer switch, not a page away
        v.page.locator("#values-L156").screenshot(path=str(artifacts / f"state-panel-header-{scheme}.png"))
        switch.select_option(key)
        v.page.wait_for_selector(f"#values-L156[data-shown='{key}/2']")
        assert state.inner_text().startswith(f"第 2 层 layer 2 · 运行 trace {label[key]}")
        assert v.page.locator(".an-page-trace select").input_value() == key
        assert v.page.evaluate("location.hash") == f"#L156&layer=2&trace={key}"
        v.page.evaluate("localStorage.clear()")


# ------------------------------------------------------------------ 4. Esc stays where the focus is

def test_escape_acts_only_on_the_panel_that_has_the_focus(reader: Visit) -> None:
    reader.open(PAGE, "#L156&layer=1&trace=cpu")
    reader.page.wait_for_selector("#values-L156[open] .an-rec")
    reader.page.evaluate("window.scrollTo(0, 200)")
    for box in (".md-search__input", ".an-goto input"):
        y = reader.page.evaluate("window.scrollY")
        reader.page.evaluate(f"document.querySelector({box!r}).focus({{preventScroll: true}})")
        reader.page.keyboard.press("Escape")
        assert reader.page.eval_on_selector("#values-L156", "d => d.open"), box
        assert abs(reader.page.evaluate("window.scrollY") - y) < 2, box
    reader.page.focus("#values-L156 .an-layer-select")
    reader.page.keyboard.press("Escape")
    assert not reader.page.eval_on_selector("#values-L156", "d => d.open")
    assert reader.page.evaluate("document.activeElement.matches('#values-L156 > summary')")


# ------------------------------------------------------------------ 8. the line bar on a phone

def phone(browser, site: Path, scheme: str = "light"):
    """A touch phone (390×844) that may read the clipboard."""
    context = browser.new_context(viewport=PHONE, has_touch=True, is_mobile=True, color_scheme=scheme,
                                  permissions=["clipboard-read", "clipboard-write"])
    return context, context.new_page()


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_line_bar_leaves_the_opened_panel_readable_on_a_phone(browser, traced_site: Path, scheme: str,
                                                              artifacts: Path) -> None:
    context, page = phone(browser, traced_site, scheme)
    try:
        page.goto((traced_site / PAGE).as_uri() + "#L156&layer=2&trace=cpu")
        page.wait_for_selector("#values-L156[open] .an-rec")
        page.wait_for_selector("#an-linebar:not([hidden])")
        bar = page.locator("#an-linebar").bounding_box()
        head = page.locator("#values-L156 .an-view .an-var-head").first.bounding_box()
        stats = page.locator("#values-L156 .an-view .an-stats").first.bounding_box()
        line = page.locator("#L156").bounding_box()
        header = page.locator(".md-header").bounding_box()
        # a lesson's value link shows the line below the header and the first variable's numbers (its ‖·‖ row)
        # above the bar, all at once (issue 34 #18): the legend is folded, the words come after the numbers
        assert bar and head and stats and line and header, (bar, head, stats, line)
        assert line["y"] >= header["y"] + header["height"] - 1, (line, header)
        assert head["y"] >= 0 and stats["y"] + stats["height"] <= bar["y"], (stats, bar)
        page.screenshot(path=str(artifacts / f"state-phone-bar-{scheme}.png"))
        # the page keeps the bar's height free: at the very end, the footer stands above the bar
        page.evaluate("window.scrollTo(0, document.documentElement.scrollHeight)")
        last = page.locator(".md-footer").bounding_box()
        assert last and last["y"] + last["height"] <= bar["y"] + 1, (last, bar)
        # a tap on a traced line opens its panel clear of the bar, too
        page.evaluate("window.scrollTo(0, 0)")
        page.locator("#L151 .an-code").tap()
        page.wait_for_selector("#values-L151[open] .an-rec")
        first = page.locator("#values-L151 .an-view .an-var-head").first.bounding_box()
        assert first and first["y"] + first["height"] <= page.locator("#an-linebar").bounding_box()["y"]
        assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    finally:
        context.close()


@pytest.mark.parametrize("page_path,line", [(PAGE, 154), (PAGE, 157), (HF_PAGE, 270)],
                         ids=["qwen3-L154", "qwen3-L157", "hf-L270"])
def test_a_value_link_shows_the_line_and_its_first_numbers_on_a_phone(browser, traced_site: Path, page_path: str,
                                                                      line: int) -> None:
    """The lesson's value links (#L…&layer=…): the line lands below the fixed header and the first variable's
    ‖·‖ row above the fixed citation bar, on nano-vllm's page and HF's (issue 34 #18)."""
    context, page = phone(browser, traced_site)
    try:
        page.goto((traced_site / page_path).as_uri() + f"#L{line}&layer=1&trace=cpu")
        page.wait_for_selector(f"#values-L{line}[open] .an-view .an-stats")
        page.wait_for_selector("#an-linebar:not([hidden])")
        page.wait_for_timeout(300)
        bar, header = page.locator("#an-linebar").bounding_box(), page.locator(".md-header").bounding_box()
        row = page.locator(f"#L{line}").bounding_box()
        stats = page.locator(f"#values-L{line} .an-view .an-stats").first.bounding_box()
        assert bar and header and row and stats
        assert row["y"] >= header["y"] + header["height"] - 1, (row, header)
        assert stats["y"] >= header["y"] + header["height"] and stats["y"] + stats["height"] <= bar["y"], (stats, bar)
        assert "‖·‖₂" in page.locator(f"#values-L{line} .an-view .an-stats").first.inner_text()
    finally:
        context.close()


def test_line_bar_reads_odd_addresses(browser, traced_site: Path) -> None:
    context, page = phone(browser, traced_site)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        uri = (traced_site / PAGE).as_uri()
        page.goto(uri + "#L99999")                                           # no such line
        page.wait_for_selector("#an-linebar:not([hidden])")
        assert "99999" in page.locator(".an-linebar-where").inner_text()
        assert page.locator(".an-linebar-where").evaluate("e => e.getClientRects().length") == 1   # one line
        assert not page.locator("#an-linebar .an-cite").is_visible()
        page.goto("about:blank")
        page.goto(uri + "#L156-L150")                                        # a reversed range
        page.wait_for_selector("#L150.an-hl")
        assert page.evaluate("location.hash") == "#L150-L156"
        assert page.locator(".an-row.an-hl").count() == 7
        assert page.locator(".an-linebar-where").inner_text() == "L150–156"
        page.locator("#an-linebar .an-cite").tap()
        page.wait_for_function("navigator.clipboard.readText().then(t => t.length > 0)")
        text = page.evaluate("navigator.clipboard.readText()")
        assert "qwen3.py:150-156" in text and text.count("\n") > 7
        page.goto("about:blank")
        page.goto(uri + "#L156&layer=%E0%A4%A&trace=%zz")                    # malformed escapes
        page.wait_for_selector("#an-linebar:not([hidden])")
        assert page.locator(".an-linebar-where").inner_text() == "L156"
        assert page.locator(".an-linebar-where").evaluate("e => e.getClientRects().length") == 1
    finally:
        context.close()
    assert errors == []


@pytest.mark.parametrize("viewport", [PHONE, WIDE], ids=["phone", "desktop"])
def test_line_references_never_break_inside_their_number(browser, traced_site: Path, viewport: dict) -> None:
    assert Path(CHROMIUM).exists()
    with visiting(browser, traced_site, viewport) as v:
        v.open("lesson.html")
        broken = v.page.evaluate("""() => [...document.querySelectorAll(
              '.md-typeset a:has(+ .an-upstream) code, .an-cited-value a')]
            .filter(e => e.getClientRects().length > 1).map(e => e.textContent)""")
        count = v.page.locator(".md-typeset a:has(+ .an-upstream) code").count()
    assert count > 5 and broken == []


# ------------------------------------------------------------------ 5. the panel's own switch, a remembered trace

def test_panel_switch_names_the_trace_the_address_chose_and_switches_back(reader: Visit, traced_project: Path) -> None:
    key, _ = other_trace(traced_project)   # not the first option: a copy of the banner would say `cpu`
    reader.open(PAGE, f"#L156&layer=1&trace={key}")
    reader.page.wait_for_selector(f"#values-L156[open][data-shown='{key}/1']")
    switch = reader.page.locator("#values-L156 .an-trace-select")
    assert switch.input_value() == key
    assert reader.page.locator(".an-page-trace select").input_value() == key
    switch.select_option("cpu")                                               # the first option does act
    reader.page.wait_for_selector("#values-L156[data-shown='cpu/1']")
    assert reader.page.evaluate("location.hash") == "#L156&layer=1&trace=cpu"
    assert switch.input_value() == "cpu"
    reader.page.evaluate("localStorage.clear()")


def test_bare_line_address_is_completed_under_a_remembered_trace(reader: Visit, traced_project: Path) -> None:
    key, _ = other_trace(traced_project)
    reader.open(PAGE)
    reader.page.evaluate(f"localStorage.setItem('annotate.trace', {key!r})")
    reader.page.goto("about:blank")
    reader.open(PAGE, "#L156")
    reader.page.wait_for_function(f"location.hash.startsWith('#L156&') && location.hash.endsWith('trace={key}')")
    copied = reader.page.evaluate("location.hash")
    assert not reader.page.eval_on_selector("#values-L156", "d => d.open")   # a bare line only lands on it
    wait_summaries(reader, key)
    folded = reader.page.locator("#values-L156 .an-brief").inner_text()
    # the copied address shows the same trace, and L156 the same values, in a browser that remembers nothing
    reader.page.evaluate("localStorage.clear()")
    reader.page.goto("about:blank")
    reader.open(PAGE, copied)
    assert reader.page.locator(".an-page-trace select").input_value() == key
    reader.page.wait_for_selector(f"#values-L156[data-shown^='{key}/']")
    assert reader.page.locator("#values-L156 .an-trace-select").input_value() == key
    assert reader.page.locator("#values-L156 .an-brief").inner_text() == folded
    reader.page.evaluate("localStorage.clear()")


# ------------------------------------------------------------------ 6. a phone: lesson links, folded summaries

def test_a_lesson_value_link_lands_clear_of_the_header_and_the_bar_on_a_phone(browser, traced_site: Path,
                                                                              artifacts: Path) -> None:
    """The line a lesson value names lands below the fixed header (its row was under it), and the opened panel's
    first identity (≡) stands above the fixed citation bar."""
    context, page = phone(browser, traced_site)
    try:
        page.goto((traced_site / "lesson.html").as_uri())
        links = page.eval_on_selector_all(".an-cited-value a[href*='qwen3.py.html#L']", "as => as.map(a => a.getAttribute('href'))")
        if not links:
            pytest.skip("the lesson cites no qwen3.py value here")
        for href in dict.fromkeys(links):
            page.goto((traced_site / "lesson.html").as_uri())
            page.locator(f".an-cited-value a[href='{href}']").first.click()
            line = href.split("#L")[1].split("&")[0]
            page.wait_for_selector(".an-values[open] .an-view .an-id")
            page.wait_for_selector("#an-linebar:not([hidden])")
            page.wait_for_timeout(300)   # the bar's clearance scroll
            header = page.locator(".md-header").bounding_box()
            row = page.locator(f"#L{line}").bounding_box()
            bar = page.locator("#an-linebar").bounding_box()
            head = page.locator(".an-values[open] .an-view .an-id").first.bounding_box()   # the first ≡ line
            assert header and row and bar and head
            assert row["y"] >= header["y"] + header["height"] - 1, (href, row, header)
            assert head["y"] + head["height"] <= bar["y"], (href, head, bar)
        page.screenshot(path=str(artifacts / "state-phone-lesson-link.png"))
    finally:
        context.close()


def test_folded_summaries_wrap_rather_than_cut_the_residual_identity_on_a_phone(browser, traced_site: Path) -> None:
    context, page = phone(browser, traced_site)
    try:
        page.goto((traced_site / PAGE).as_uri())
        for line in (154, 156, 158):
            got = page.eval_on_selector(f"#values-L{line} > summary", """s => { const b = s.querySelector('.an-brief');
                const r = document.createRange(); r.selectNodeContents(b); const rects = [...r.getClientRects()];
                const box = s.getBoundingClientRect();
                return {text: b.textContent, cut: s.scrollWidth > s.clientWidth + 1,
                        inside: rects.every(q => q.right <= box.right + 1 && q.bottom <= box.bottom + 1)}; }""")
            assert "residual ≡" in got["text"] and not got["cut"] and got["inside"], (line, got)
    finally:
        context.close()
