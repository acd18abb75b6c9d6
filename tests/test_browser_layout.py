"""Layout, contrast and theme on every built page, in a real headless Chromium with the reader's CJK fonts.

On a phone (390×844) nothing a page needs is hidden: every formula, code segment, table and figure either
fits or sits in a box that says it scrolls (docs/js/more.js); side-by-side statements of a formula stack
(annotate/render/katex.py display_parts); wide tables become cards. Text meets WCAG contrast (code and the
≡ line 7:1, the rest 4.5:1) in light and dark, and the plots follow the colour scheme. Screenshots go
to test-artifacts/.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from browser_helpers import CONTRAST_SWEEP_JS, DESKTOP, PHONE, assert_cjk_font, visiting

pytest_plugins = ["site_fixtures", "browser_fixtures", "values_fixtures"]
pytestmark = pytest.mark.browser

SCHEMES = ("light", "dark")
QWEN3 = "source/nanovllm/models/qwen3.py.html"
HF = "source/transformers/models/qwen3/modeling_qwen3.py.html"

# Every formula, code segment, table and figure of the article: a box it is clipped by (overflow not
# visible, content wider than the box) must be a scroll box marked by more.js (data-an-more, and a
# visible hint just before it, or before its <pre>); `overflow: hidden` that cuts content is never
# allowed; content outside any box must lie within the screen.
CLIPPED_JS = """() => {
  const vw = document.documentElement.clientWidth;
  const root = document.querySelector('article') || document.body;
  const name = el => el.tagName.toLowerCase() + (typeof el.className === 'string' && el.className.trim()
    ? '.' + el.className.trim().split(/\\s+/).join('.') : '');
  const hinted = box => {
    const anchor = box.tagName === 'CODE' && box.parentElement.tagName === 'PRE' ? box.parentElement : box;
    const h = anchor.previousElementSibling;
    if (!box.hasAttribute('data-an-more') || !h || !h.classList.contains('an-more-hint')) return false;
    const r = h.getBoundingClientRect();
    return r.width > 0 && r.height > 0 && r.left >= 0 && r.right <= vw && getComputedStyle(h).visibility !== 'hidden';
  };
  const boxes = new Map(), out = [];
  for (const el of root.querySelectorAll('.katex, .an-seg, pre, table, svg, img')) {
    if (!el.getClientRects().length) continue;                 // not rendered: a closed <details>, the other scheme
    let boxed = false;
    for (let a = el; a && a !== root.parentElement; a = a.parentElement) {
      if (getComputedStyle(a).overflowX === 'visible') continue;
      if (a !== el) boxed = true;
      if (a.scrollWidth > a.clientWidth + 1) boxes.set(a, el);
    }
    const r = el.getBoundingClientRect();
    if (!boxed && (r.right > vw + 1 || r.left < -1)) out.push({box: name(el), why: 'off screen', right: Math.round(r.right)});
  }
  for (const [box, el] of boxes) {
    const ox = getComputedStyle(box).overflowX;
    const why = ox === 'hidden' || ox === 'clip' ? 'cut off (overflow ' + ox + ')' : hinted(box) ? null : 'scrolls without a hint';
    if (why) out.push({box: name(box), why, content: name(el), text: box.textContent.trim().slice(0, 50),
                       hidden_px: box.scrollWidth - box.clientWidth});
  }
  return out;
}"""


def _pages(site: Path) -> list[str]:
    return sorted(p.relative_to(site).as_posix() for p in site.rglob("*.html"))


@dataclass
class PhoneTour:
    """Every page of the traced site opened once on a phone in one colour scheme, measured for the tests that
    need the whole site at 390 px: what is clipped without a hint (CLIPPED_JS) and the page's own width.
    The traced site is the project's pages plus the values panels of its traces: every built page, and more."""

    pages: list[str] = field(default_factory=list)
    clipped: dict[str, list] = field(default_factory=dict)
    widths: dict[str, tuple[int, int]] = field(default_factory=dict)   # page -> (scrollWidth, innerWidth)


_TOURS: dict[str, PhoneTour] = {}


def phone_tour(browser, site: Path, scheme: str) -> PhoneTour:
    """The tour of `scheme`, made on first use in this test process (one tour serves both tests below)."""
    if scheme not in _TOURS:
        tour = PhoneTour(_pages(site))
        with visiting(browser, site, PHONE, scheme) as v:
            v.open("lesson.html")
            assert_cjk_font(v.page)                                         # measured as a Chinese reader sees it
            for rel in tour.pages:
                v.open(rel)
                v.page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
                found = v.page.evaluate(CLIPPED_JS)
                if found:
                    tour.clipped[rel] = found
                sw, iw = v.page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
                tour.widths[rel] = (sw, iw)
        _TOURS[scheme] = tour
    return _TOURS[scheme]


@pytest.mark.parametrize("scheme", SCHEMES)
def test_nothing_is_clipped_unmarked_on_a_phone(browser, traced_site: Path, scheme: str, artifacts: Path) -> None:
    tour = phone_tour(browser, traced_site, scheme)
    assert len(tour.pages) >= 40 and set(tour.widths) == set(tour.pages)   # the tour saw every page
    with visiting(browser, traced_site, PHONE, scheme) as v:
        v.open("lesson.html")
        v.page.locator(".an-more-hint").first.scroll_into_view_if_needed()
        v.page.screenshot(path=str(artifacts / f"layout-phone-hint-{scheme}.png"))
    assert not tour.clipped, f"{scheme}: clipped content without a scroll hint at 390 px: {tour.clipped}"


@pytest.mark.parametrize("scheme", SCHEMES)
def test_no_page_is_wider_than_a_phone(browser, traced_site: Path, scheme: str, artifacts: Path) -> None:
    """(From the reader's journey, tests/test_browser_reader.py: it shares the layout tests' phone tour.)"""
    tour = phone_tour(browser, traced_site, scheme)
    wide = {rel: sw for rel, (sw, iw) in tour.widths.items() if sw > iw}
    with visiting(browser, traced_site, PHONE, scheme) as v:
        for rel, name in (("index.html", "index"), ("lesson.html", "lesson"), (QWEN3, "qwen3")):
            v.open(rel)
            v.page.screenshot(path=str(artifacts / f"reader-phone-{name}-{scheme}.png"))
    assert not wide, f"pages wider than {PHONE['width']} px: {wide}"


def test_nothing_is_clipped_unmarked_on_a_desktop(browser, built_site: Path) -> None:
    with visiting(browser, built_site, DESKTOP) as v:
        clipped = {}
        for rel in _pages(built_site):
            v.open(rel)
            found = v.page.evaluate(CLIPPED_JS)
            if found:
                clipped[rel] = found
        assert not clipped, f"clipped content without a scroll hint at {DESKTOP['width']} px: {clipped}"


def test_the_lesson_formulas_stack_whole_on_a_phone(browser, built_site: Path, artifacts: Path) -> None:
    """RMSNorm's `, γ ∈ ℝᴴ` and MLP's SiLU definition: each statement on screen, none scrolled away."""
    with visiting(browser, built_site, PHONE) as v:
        v.open("lesson.html")
        assert_cjk_font(v.page)
        parts = v.page.eval_on_selector_all(".an-math-parts", """els => els.map(e => ({
            text: e.querySelector('.katex-mathml') ? e.textContent.slice(0, 40) : '',
            parts: [...e.querySelectorAll(':scope > .katex-display')].map(d => {
                const r = d.querySelector('.katex-html').getBoundingClientRect();
                return [Math.round(r.left), Math.round(r.right), d.scrollWidth <= d.clientWidth + 1]; })}))""")
        assert len(parts) >= 2, "the RMSNorm and MLP formulas are cut into their statements"
        for formula in parts:
            assert len(formula["parts"]) >= 2
            for left, right, fits in formula["parts"]:
                assert left >= 0 and right <= PHONE["width"] and fits, formula
        v.page.locator(".an-math-parts").first.scroll_into_view_if_needed()
        v.page.screenshot(path=str(artifacts / "layout-phone-rmsnorm.png"))


@pytest.mark.parametrize("page,line", [(QWEN3, 156), (HF, 270)])
def test_the_x1_lines_fit_a_phone(browser, built_site: Path, page: str, line: int) -> None:
    """qwen3.py L156 and HF's L270 (the lines that hold x₁) wrap inside their row: no sideways scroll."""
    with visiting(browser, built_site, PHONE) as v:
        v.open(page, f"#L{line}")
        v.page.wait_for_selector(f"#L{line}.an-hl")
        seg = v.page.eval_on_selector(f"#L{line}", """row => { const s = row.closest('.an-seg');
            const c = row.querySelector('.an-code').getBoundingClientRect();
            return [s.scrollWidth, s.clientWidth, Math.round(c.right)]; }""")
        assert seg[0] <= seg[1] + 1 and seg[2] <= PHONE["width"], seg


def test_wide_tables_become_cards_on_a_phone(browser, built_site: Path, artifacts: Path) -> None:
    """The map's tables and the HF page's wide table (its symbols; its values are panels now, measured by
    test_browser_hf_values) read as cards on a phone: every cell on screen, each labelled with its column."""
    with visiting(browser, built_site, PHONE) as v:
        for page in ("map.html", HF):
            v.open(page)
            v.page.evaluate("() => document.querySelectorAll('article details').forEach(d => d.open = true)")
            v.page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
            tables = v.page.eval_on_selector_all("article table[data-an-cards]", """ts => ts.map(t => ({
                head: t.tHead ? t.tHead.textContent.replace(/\\s+/g, ' ').trim().slice(0, 80) : '',
                off: [...t.querySelectorAll('td')].filter(td => td.getClientRects().length
                       && td.getBoundingClientRect().right > window.innerWidth + 1).length,
                labelled: [...t.querySelectorAll('td')].every(td => td.hasAttribute('data-an-label'))}))""")
            assert tables, f"{page}: no wide table became cards"
            assert all(t["off"] == 0 and t["labelled"] for t in tables), tables
            if page == HF:
                assert any(t["head"].startswith("symbol") for t in tables), tables
            v.page.locator("article table[data-an-cards]").first.scroll_into_view_if_needed()
            v.page.screenshot(path=str(artifacts / f"layout-phone-cards-{Path(page).stem}.png"))


@pytest.mark.parametrize("scheme", SCHEMES)
def test_text_contrast_code_and_identities_7_the_rest_4_5(browser, built_site: Path, scheme: str) -> None:
    """WCAG contrast from computed colours against the composited background: every token of code (on a
    plain and on a highlighted line) and the ≡ line of an open panel ≥ 7:1, every other text ≥ 4.5:1."""
    pages = [(QWEN3, "#L156&layer=1"), (HF, "#L270"), ("lesson.html", ""), ("index.html", ""), ("map.html", ""),
             ("diagrams.html", ""), ("trace/index.html", "")]
    with visiting(browser, built_site, DESKTOP, scheme) as v:
        low, seen = {}, {"code": 0, "identity": 0}
        for page, anchor in pages:
            v.open(page, anchor)
            if page == QWEN3 and v.page.locator("#values-L156").count():
                v.page.wait_for_selector("#values-L156[open] .an-id")
            for r in v.page.evaluate(CONTRAST_SWEEP_JS):
                seen["code"] += r["need"] == 7
                seen["identity"] += ".an-id" in r["what"]
                if r["ratio"] < r["need"]:
                    low.setdefault(f"{page} {r['what']} (needs {r['need']})", (r["ratio"], r["text"]))
        assert seen["code"] > 1000, seen                                      # the sweep saw the code
        assert not low, f"{scheme}: text below its contrast: {low}"


def test_plots_follow_the_scheme_with_a_bilingual_title(browser, traced_site: Path, artifacts: Path) -> None:
    """The trace page's plots (drawn from a trace: a clean clone's tests record the tiny ones) show the
    rendering of the reader's colour scheme, each with a Chinese title and English beside it."""
    for scheme, suffix in (("light", ".svg"), ("dark", "-dark.svg")):
        with visiting(browser, traced_site, PHONE, scheme) as v:
            v.open("trace/index.html")
            assert v.page.locator(".an-plot").count(), "the trace page shows no plots"
            shown = v.page.eval_on_selector_all(".an-plot img", """imgs => imgs.filter(i => i.getClientRects().length)
                .map(i => [i.getAttribute('src'), i.complete && i.naturalWidth > 0])""")
            assert shown and all(src.endswith(suffix) and ok for src, ok in shown), (scheme, shown)
            assert len(shown) == v.page.locator(".an-plot").count()              # one rendering per figure
            titles = v.page.eval_on_selector_all(".an-plot-title", """fs => fs.map(f => [f.firstChild.textContent,
                (f.querySelector('[lang=en]') || {}).textContent || ''])""")
            assert titles and all(re.search("[\u4e00-\u9fff]", zh) and en for zh, en in titles), titles
            v.page.locator(".an-plot").first.scroll_into_view_if_needed()
            v.page.screenshot(path=str(artifacts / f"layout-plot-{scheme}.png"))
