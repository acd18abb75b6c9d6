"""The built site in a real headless Chromium, opened from disk (file://) like a reader would.

Each test keeps a screenshot under test-artifacts/. The site is built once per session.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Iterator

import pytest

from browser_helpers import DESKTOP, PHONE, Visit

pytest_plugins = ["site_fixtures", "browser_fixtures"]
pytestmark = pytest.mark.browser

LAYERNORM = "source/nanovllm/layers/layernorm.py.html"
QWEN3 = "source/nanovllm/models/qwen3.py.html"


@pytest.fixture
def visit(browser, built_site: Path, artifacts: Path, request) -> Iterator[Visit]:
    v = Visit(browser, built_site, getattr(request, "param", DESKTOP))
    yield v
    v.shot(artifacts, request.node.name.replace("[", "-").rstrip("]"))
    v.close()


def test_qwen3_line_156_is_highlighted_and_in_view(visit: Visit) -> None:
    visit.open(QWEN3, "#L156")
    visit.page.wait_for_selector("#L156.an-hl")
    assert visit.page.locator(".an-row.an-hl").count() == 1
    assert visit.in_viewport("#L156")
    assert visit.page.locator("#L156 .an-code").inner_text().strip().startswith("hidden_states, residual =")
    assert visit.non_local() == []


def test_range_anchor_highlights_add_rms_forward(visit: Visit) -> None:
    visit.open(LAYERNORM, "#L28-L40")
    visit.page.wait_for_selector("#L28.an-hl")
    lines = visit.page.eval_on_selector_all(".an-row.an-hl", "rows => rows.map(r => +r.dataset.line)")
    assert lines == list(range(28, 41))
    assert visit.in_viewport("#L28")


def _visible_text(visit: Visit, selector: str) -> str:
    """Text a reader sees in an element: KaTeX's hidden MathML copy left out."""
    return visit.page.eval_on_selector(selector, """el => { const c = el.cloneNode(true);
        c.querySelectorAll('.katex-mathml').forEach(m => m.remove()); return c.innerText; }""")


def test_add_rms_forward_note_opens_with_rendered_math(visit: Visit) -> None:
    visit.open(LAYERNORM)
    visit.page.click("#L36 a.an-mark")
    card = "aside.an-note[data-start='36']"
    visit.page.wait_for_selector(f"{card}.an-flash")
    assert visit.in_viewport(card)
    visit.page.click(f"{card} details.an-en > summary")
    assert visit.page.eval_on_selector(f"{card} details.an-en", "d => d.open")
    katex = visit.page.locator(f"{card} .katex-html")
    assert katex.count() >= 3 and katex.first.is_visible()
    assert visit.page.locator(f"{card} details.an-en .katex-html").first.is_visible()
    fonts = visit.page.evaluate("document.fonts.ready.then(() => document.fonts.check('16px KaTeX_Main'))")
    assert fonts
    text = _visible_text(visit, card)
    assert "$" not in text and "\\(" not in text and "\\mathrm" not in text
    assert visit.non_local() == []


@pytest.mark.parametrize("visit", [PHONE], indirect=True, ids=["phone"])
def test_notes_read_without_hovering_on_a_phone(visit: Visit) -> None:
    visit.open(LAYERNORM, "#L36")
    card = visit.page.locator("aside.an-note[data-start='36']")
    box = card.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"]
    assert card.locator(".an-zh").is_visible() and card.locator(".katex-html").first.is_visible()
    assert visit.page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]


@pytest.mark.parametrize("visit", [PHONE], indirect=True, ids=["phone"])
def test_a_wrapped_line_continues_deeper_than_its_indentation_on_a_phone(visit: Visit) -> None:
    """A long indented line wraps inside its row, and its second visual line starts to the right of
    where its code starts (a hanging indent), so it does not read as a new, shallower statement."""
    visit.open(QWEN3)
    row = visit.page.locator(".an-row", has_text="qkv.split(").first
    shape = row.locator(".an-code").evaluate("""el => {
        const first = el.querySelector('span').getBoundingClientRect();
        const rects = [...el.querySelectorAll('span')].flatMap(s => [...s.getClientRects()]);
        const later = rects.filter(r => r.top > first.top + first.height / 2);
        return {start: first.left, lines: new Set(rects.map(r => Math.round(r.top))).size,
                next: later.length ? Math.min(...later.map(r => r.left)) : null}; }""")
    assert shape["lines"] >= 2 and shape["next"] is not None, shape
    assert shape["next"] > shape["start"] + 2, shape
    assert visit.page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]


def test_index_reference_lands_on_the_highlighted_line(visit: Visit) -> None:
    visit.open("index.html")
    visit.page.click("a[href$='layernorm.py.html#L36']")
    visit.page.wait_for_selector("#L36.an-hl")
    assert visit.page.url.endswith(f"{LAYERNORM}#L36") and visit.in_viewport("#L36")
    assert visit.non_local() == []


def test_dark_mode_toggle(visit: Visit) -> None:
    visit.open(QWEN3, "#L181")
    before = visit.page.get_attribute("body", "data-md-color-scheme")
    visit.page.click("label.md-header__button[for^='__palette']:visible")
    after = visit.page.get_attribute("body", "data-md-color-scheme")
    assert {before, after} == {"default", "slate"}


def test_search_works_from_disk_without_a_cdn(visit: Visit) -> None:
    visit.open("index.html")
    visit.page.focus("input.md-search__input")
    visit.page.keyboard.type("add_rms_forward")
    visit.page.wait_for_selector(".md-search-result__item", timeout=30_000)
    assert visit.page.locator(".md-search-result__item").count() >= 1
    assert visit.non_local() == []


def test_chinese_words_are_found_inside_sentences(visit: Visit) -> None:
    """Chinese has no spaces: without segmentation at build time a word in mid-sentence is unfindable."""
    visit.open("index.html")
    visit.page.focus("input.md-search__input")
    visit.page.keyboard.type("除以")  # "divide by": only ever mid-clause (…再除以标准差…)
    visit.page.wait_for_selector(".md-search-result__item", timeout=30_000)
    titles = visit.page.locator(".md-search-result__item").all_inner_texts()
    assert any("layernorm.py" in t or "RMSNorm" in t for t in titles), titles


def search(visit: Visit, query: str) -> list[str]:
    """Type ``query`` into Material's search box; the result links' hrefs, in the order shown."""
    visit.page.focus("input.md-search__input")
    visit.page.keyboard.type(query)
    visit.page.wait_for_selector(".md-search-result__item", timeout=30_000)
    visit.page.wait_for_timeout(300)   # the worker answers per keystroke: let the last answer land
    return visit.page.eval_on_selector_all("a.md-search-result__link", "as => as.map(a => a.getAttribute('href'))")


def test_search_for_residual_ranks_the_lesson_first_and_lands_on_lines(visit: Visit) -> None:
    visit.open("index.html")
    hrefs = search(visit, "residual")
    lesson = next(i for i, h in enumerate(hrefs) if "lesson.html" in h)
    qwen2 = [i for i, h in enumerate(hrefs) if "qwen2.py.html" in h]
    assert not qwen2 or lesson < qwen2[0], hrefs[:12]
    assert any(re.search(r"/qwen3\.py\.html(\?[^#]*)?#L\d+$", h) for h in hrefs), hrefs[:12]
    teasers = visit.page.eval_on_selector_all(
        ".md-search-result__item", "its => its.map(i => [i.querySelector('a').getAttribute('href'), "
        "(i.querySelector('.md-search-result__teaser') || {}).textContent || ''])")
    assert teasers and not [t for _, t in teasers if "加载中" in t or "loading…" in t]   # no panel chrome
    assert not [h for h, t in teasers if "/source/" in h and "复制引用" in t]          # no button labels
    assert not [h for h, t in teasers if "/source/" in h and "cpucpu" in t]            # no trace names run together


def test_a_symbol_hit_lands_on_its_line(visit: Visit) -> None:
    visit.open("index.html")
    hrefs = search(visit, "Qwen3DecoderLayer.forward")
    target = next(h for h in hrefs if re.search(r"/qwen3\.py\.html(\?[^#]*)?#L\d+$", h))
    line = target.split("#L")[1].split("-")[0]
    visit.page.click(f'a.md-search-result__link[href="{target}"]')
    visit.page.wait_for_selector(f"#L{line}.an-hl")
    assert visit.page.url.endswith(f"#L{line}") and visit.in_viewport(f"#L{line}")
    assert visit.page.locator(f"#L{line} .an-code").inner_text().strip().startswith("def forward")


def _bytes(urls: list[str]) -> int:
    """What a reader's browser read from disk for these requests (file:// only; each file once)."""
    from urllib.parse import unquote, urlparse

    files = {Path(unquote(urlparse(u).path)) for u in urls if u.startswith("file://")}
    return sum(f.stat().st_size for f in files if f.is_file())


def test_the_full_depth_trace_weighs_on_the_layer_opened_only(browser, built_site: Path, artifacts: Path) -> None:
    """The committed 28-layer H200 trace is on the site; a first open of qwen3.py reads none of its values, and
    opening one panel at layer 27 under it reads that layer's scripts only: a small part of the 28 layers'."""
    key = "cuda-full-depth"
    scripts = sorted((built_site / "source/nanovllm/models").glob(f"qwen3.py.values-{key}.*.js"))
    assert {p.name.rsplit(".", 2)[-2] for p in scripts} >= {"L0", "L27", "B27"}, "every layer has its scripts"
    every_layer = sum(p.stat().st_size for p in scripts)
    v = Visit(browser, built_site, DESKTOP)
    try:
        v.open(QWEN3)
        first = list(v.requests)
        assert not [u for u in first if ".values-" in u]                     # nothing of any trace before a panel opens
        first_bytes = _bytes(first)
        v.open(QWEN3, f"#L156&layer=27&trace={key}")
        v.page.wait_for_selector("#values-L156[open][data-shown]")
        assert v.page.locator("#values-L156 .an-layer-select").input_value() == "27"
        assert "H200" in v.page.locator("#values-L156").inner_text()           # its values, under its label
        loaded = [u for u in v.requests[len(first):] if ".values-" in u]
        assert loaded and all(f".values-{key}." in u for u in loaded), loaded
        # that layer's views and summary lines, and the summary lines of the lines outside the layers (Qwen3Model's)
        assert {u.rsplit(".", 2)[-2] for u in loaded} <= {"L27", "B27", "Bnone"}, loaded
        panel_bytes = _bytes(loaded)
        print(f"qwen3.py first open {first_bytes} B; one panel at layer 27 of {key}: {panel_bytes} B "
              f"of {every_layer} B for all its layers")
        assert panel_bytes * 10 < every_layer
        v.shot(artifacts, "full-depth-layer-27")
    finally:
        v.close()


def test_the_layer_switch_reaches_layer_27_of_the_full_depth_trace_on_a_phone(browser, built_site: Path,
                                                                             artifacts: Path) -> None:
    """On a 390 px phone, a panel under the 28-layer trace offers all 28 layers; choosing 27 shows layer 27's
    values and puts it in the address, and the switch stays inside the screen."""
    key = "cuda-full-depth"
    v = Visit(browser, built_site, PHONE)
    try:
        v.open(QWEN3, f"#L156&layer=0&trace={key}")
        v.page.wait_for_selector("#values-L156[open][data-shown]")
        select = v.page.locator("#values-L156 .an-layer-select")
        options = select.evaluate("s => Array.from(s.options).map(o => o.value)")
        assert [str(n) for n in range(28)] == [o for o in options if o.isdigit()], options
        box = select.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"]
        select.select_option("27")
        v.page.wait_for_function("() => location.hash.includes('layer=27')")
        v.page.wait_for_selector(f"#values-L156[data-shown='{key}/27'] .an-rec")   # that layer's views, shown
        assert select.input_value() == "27"
        v.shot(artifacts, "full-depth-layer-27-phone")
    finally:
        v.close()
