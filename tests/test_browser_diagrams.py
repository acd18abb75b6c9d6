"""The diagrams page in a real headless Chromium, opened from disk (file://).

The site is a real strict build of a project copy whose traces/ holds the session's tiny bf16 trace,
so every diagram and counterexample is on the page. Clicking an element must highlight exactly the
cells the computed data lists; counterexample toggles must show the computed values; the keyboard
path must work; at 390 px and 1400 px, light and dark, the page must not overflow sideways.
Screenshots go to test-artifacts/.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from annotate.claims import format_value

pytest_plugins = ["site_fixtures", "browser_fixtures"]
pytestmark = pytest.mark.browser

pytest.importorskip("playwright.sync_api")

PAGE = "diagrams.html"
VIEWPORTS = {"phone": {"width": 390, "height": 844}, "desktop": {"width": 1400, "height": 1000}}


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory, tiny_trace) -> Path:
    from site_fixtures import copy_project_with_trace

    return copy_project_with_trace(tmp_path_factory.mktemp("dgsite") / "project", tiny_trace.out)


@pytest.fixture(scope="module")
def site(project: Path) -> Path:
    from annotate.cli.site import build_site

    target = project / "site"
    build_site(project, target, strict=True)
    assert (target / PAGE).is_file()
    return target


@pytest.fixture(scope="module")
def diagrams(project: Path):
    from annotate.lesson.diagrams import all_diagrams
    from annotate.lesson.table import load_table

    table = load_table(project)
    return table, all_diagrams(table)


@pytest.fixture
def page(browser, site: Path) -> Iterator:
    context = browser.new_context(viewport=VIEWPORTS["desktop"])
    tab = context.new_page()
    requests: list[str] = []
    tab.on("request", lambda r: requests.append(r.url))
    tab.goto((site / PAGE).as_uri())
    tab.wait_for_load_state("load")
    yield tab
    assert [u for u in requests if not u.startswith(("file://", "data:", "blob:"))] == []
    context.close()


def highlighted(tab, diagram: str) -> set[str]:
    return set(tab.eval_on_selector_all(f'[data-diagram="{diagram}"] .dg-on', "els => els.map(e => e.dataset.cell)"))


def formula(tab, diagram: str) -> str:
    """The selected cell's arithmetic (the output also holds its 引用 cite button)."""
    return tab.inner_text(f'[data-diagram="{diagram}"] .dg-formula .dg-formula-text')


def cell(diagram: str, cid: str) -> str:
    return f'[data-diagram="{diagram}"] button.dg-cell[data-cell="{cid}"]'


@pytest.mark.parametrize("key", ["swiglu", "rmsnorm", "traced"])
def test_click_highlights_exactly_the_computed_dependencies(page, diagrams, key):
    _, all_ = diagrams
    deps = all_[key].deps()
    assert deps
    for cid, want in deps.items():
        page.click(cell(key, cid))
        assert highlighted(page, key) == set(want), cid
        assert formula(page, key) == all_[key].cells[cid].formula
        assert page.get_attribute(cell(key, cid), "aria-pressed") == "true"


def test_output_arithmetic_and_silu_are_shown_with_numbers(page, diagrams):
    table, all_ = diagrams
    page.click(cell("swiglu", "out.0.2"))
    text = formula(page, "swiglu")
    assert text.startswith("out[0, 2] = Σⱼ p[0, j]·W_d[2, j] = ")
    assert text.endswith(format_value(table.claims["swiglu.out"].value[2]))
    page.click(cell("swiglu", "out.1.2"))
    assert formula(page, "swiglu").endswith(format_value(table.claims["swiglu.tok1.out"].value[2]))
    page.click(cell("swiglu", "gate.0.1"))
    text = formula(page, "swiglu")
    assert "SiLU(z) = z·σ(z)" in text and text.endswith(format_value(table.claims["swiglu.silu"].value[1]))


def test_counterexample_toggles_show_the_computed_values(page, diagrams):
    table, all_ = diagrams
    expect = {"swap": format_value(table.claims["counter.swap.out"].value),
              "layernorm": format_value(table.claims["counter.layernorm.output"].value),
              "x2": format_value(table.claims["traced.x2.rel_hidden"].value),
              "order": str(table.claims["traced.order.n_diff"].value),
              "relu": format_value(table.claims["counter.relu.out"].value),
              "axis": format_value(table.claims["counter.axis.output"].value[1])}
    toggles = page.query_selector_all("button.dg-ce-toggle")
    assert len(toggles) == 6
    for key, text in expect.items():
        box = f'.dg-ce[data-ce="{key}"]'
        button, panel = f"{box} .dg-ce-toggle", f"{box} .dg-ce-panel"
        assert page.get_attribute(button, "aria-expanded") == "false" and not page.is_visible(panel)
        page.click(button)
        assert page.get_attribute(button, "aria-expanded") == "true" and page.is_visible(panel)
        assert text in page.inner_text(panel), key
        page.click(button)
        assert page.get_attribute(button, "aria-expanded") == "false" and not page.is_visible(panel)


def test_keyboard_tab_and_enter(page, diagrams):
    _, all_ = diagrams
    page.focus(cell("swiglu", "out.0.0"))
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.dataset.cell") == "out.0.1"
    page.keyboard.press("Enter")
    assert highlighted(page, "swiglu") == set(all_["swiglu"].deps()["out.0.1"])
    page.keyboard.press("Space")
    assert formula(page, "swiglu") == all_["swiglu"].cells["out.0.1"].formula
    toggle = '.dg-ce[data-ce="swap"] .dg-ce-toggle'
    page.focus(toggle)
    page.keyboard.press("Enter")
    assert page.get_attribute(toggle, "aria-expanded") == "true"
    page.keyboard.press("Space")
    assert page.get_attribute(toggle, "aria-expanded") == "false"


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("size", ["phone", "desktop"])
def test_layout_fits_and_screenshots(browser, site: Path, artifacts: Path, size, scheme):
    context = browser.new_context(viewport=VIEWPORTS[size], color_scheme=scheme)
    tab = context.new_page()
    tab.goto((site / PAGE).as_uri())
    tab.wait_for_load_state("load")
    want = "slate" if scheme == "dark" else "default"
    assert tab.evaluate("document.body.getAttribute('data-md-color-scheme')") == want
    tab.click(cell("swiglu", "out.0.2"))
    tab.click('.dg-ce[data-ce="swap"] .dg-ce-toggle')
    widths = tab.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    assert widths[0] <= widths[1], f"page overflows sideways at {size}: {widths}"
    tab.locator('[data-diagram="swiglu"]').scroll_into_view_if_needed()
    tab.screenshot(path=str(artifacts / f"diagrams-{size}-{scheme}.png"))
    tab.locator('[data-diagram="traced"]').scroll_into_view_if_needed()
    tab.click('.dg-ce[data-ce="order"] .dg-ce-toggle')
    tab.screenshot(path=str(artifacts / f"diagrams-{size}-{scheme}-traced.png"))
    context.close()


def test_two_tokens_show_which_axis_is_reduced_and_mixed(page, diagrams):
    """RMSNorm: a token's mean lights up that token's squares only (over H); SwiGLU: a token's output lights
    up its own row of p, never the other token's; γ is one row, [H]."""
    _, all_ = diagrams
    rows = page.eval_on_selector_all('[data-diagram="rmsnorm"] [data-block="x"] tbody tr', "rs => rs.length")
    assert rows == 2
    page.click(cell("rmsnorm", "mean.1"))
    assert highlighted(page, "rmsnorm") == {"sq.1.0", "sq.1.1"}
    page.click(cell("swiglu", "out.1.3"))
    lit = highlighted(page, "swiglu")
    assert {c for c in lit if c.startswith("p.")} == {f"p.1.{j}" for j in range(6)}
    shape = page.inner_text('[data-diagram="rmsnorm"] [data-block="g"] .dg-shape')
    assert shape.startswith("[H]") and "token" not in shape


def test_counterexamples_are_numbered_in_page_order(page, site: Path):
    """1, 2, … down the page; the lesson's links say the same numbers."""
    titles = page.eval_on_selector_all("button.dg-ce-toggle", "bs => bs.map(b => b.textContent)")
    assert [t.split("：")[0] for t in titles] == [f"反例 {i}" for i in range(1, len(titles) + 1)]
    assert all(f"Counterexample {i}:" in t for i, t in enumerate(titles, start=1))
    lesson = (site / "lesson.html").read_text(encoding="utf-8")
    assert "{{counterexample" not in lesson and "{{counterexample" not in (site / PAGE).read_text(encoding="utf-8")
    by_key = dict(zip(page.eval_on_selector_all(".dg-ce", "cs => cs.map(c => c.dataset.ce)"), range(1, 7)))
    assert f"反例 {by_key['swap']}：chunk 的顺序读反" in lesson


def test_on_a_phone_the_formula_shows_below_the_tapped_block(browser, site: Path):
    context = browser.new_context(viewport=VIEWPORTS["phone"], has_touch=True)
    tab = context.new_page()
    tab.goto((site / PAGE).as_uri())
    tab.wait_for_load_state("load")
    for cid in ("gu.1.4", "out.1.0"):
        tab.tap(cell("swiglu", cid))
        box = tab.locator(cell("swiglu", cid)).bounding_box()
        out = tab.locator('[data-diagram="swiglu"] .dg-formula').bounding_box()
        assert box and out and 0 <= out["y"] - (box["y"] + box["height"]) < 400, (cid, box, out)
        assert tab.evaluate("(() => { const r = document.querySelector('[data-diagram=\"swiglu\"] .dg-formula')"
                            ".getBoundingClientRect(); return r.top >= 0 && r.bottom <= innerHeight; })()")
    context.close()
