"""The rank switch of the values panels and the 张量并行 page in a real headless Chromium (file://),
phone and desktop, on a site built (strict) from the real `--preset tiny --tp 2` trace."""
from __future__ import annotations

from pathlib import Path

import pytest

from annotate.pages.tracefmt import num
from browser_helpers import DESKTOP, PHONE, visiting

pytest_plugins = ["site_fixtures", "browser_fixtures", "values_fixtures"]
pytestmark = [pytest.mark.browser, pytest.mark.slow]

pytest.importorskip("playwright.sync_api")

LINEAR = "nanovllm/layers/linear.py"
KEY = "cpu-tp2"


@pytest.fixture(scope="module")
def tp_site(tiny_trace_tp2, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from annotate.cli.site import build_site
    from site_fixtures import copy_project_with_trace

    root = copy_project_with_trace(tmp_path_factory.mktemp("tp") / "project", tiny_trace_tp2.out, name=KEY)
    build_site(root, root / "site", strict=True)
    return root / "site"


def _all_reduce_line(tiny_trace_tp2) -> tuple[int, int]:
    """(first line of RowParallelLinear.forward's first statement, the all_reduce line) as recorded."""
    recs = [r for r in tiny_trace_tp2.trace.records if r.function == "RowParallelLinear.forward" and r.kind == "line"]
    return recs[0].line, next(r.line for r in recs if "all_reduce(" in r.text)


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_rank_switch_shows_each_ranks_partial_sum(browser, tp_site: Path, tiny_trace_tp2, artifacts: Path,
                                                  viewport: dict) -> None:
    first, _ = _all_reduce_line(tiny_trace_tp2)
    t = tiny_trace_tp2.trace
    with visiting(browser, tp_site, viewport) as p:
        p.open(f"source/{LINEAR}.html", f"#L{first}&layer=1&trace={KEY}&rank=1")   # the URL picks the rank
        p.page.wait_for_selector(f"#values-L{first}[open][data-shown='{KEY}/1@1']")
        assert p.page.locator(f"#values-L{first} .an-rank-select").input_value() == "1"
        slices = p.page.locator(f"#values-L{first} .an-view .an-slice[data-rank='1']")
        assert slices.count() >= 1 and "rank 1 of 2" in slices.first.inner_text()
        shown = p.page.locator(f"#values-L{first} .an-view .an-var[data-var='y'] .an-stats").first.inner_text()
        want = next(r for r in t.ranks[1] if r.line == first and r.layer == 1 and r.var("y")).var("y")
        assert f"‖·‖₂ = {num(want.norm)}" in shown   # rank 1's own partial sum, not rank 0's
        p.page.locator(f"#values-L{first}").scroll_into_view_if_needed()
        p.page.screenshot(path=str(artifacts / f"tp-rank1-{viewport['width']}.png"))
        p.page.select_option(f"#values-L{first} .an-rank-select", "0")
        p.page.wait_for_selector(f"#values-L{first}[data-shown='{KEY}/1']")
        assert "rank=" not in p.page.evaluate("window.location.hash")   # rank 0: the default, not in the address
        assert p.page.locator(f"#values-L{first} .an-view .an-slice[data-rank='0']").count() >= 1
        assert p.page.evaluate("document.documentElement.scrollWidth") <= viewport["width"]
        assert p.non_local() == []


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_tp_page_is_built_and_links_to_rank_panels(browser, tp_site: Path, artifacts: Path, viewport: dict) -> None:
    with visiting(browser, tp_site, viewport) as p:
        p.open("trace/tp.html")
        assert "张量并行" in p.page.locator("h1").inner_text()
        assert p.page.locator("table").count() >= 5
        link = p.page.locator("a[href*='rank=1']").first
        p.page.screenshot(path=str(artifacts / f"tp-page-{viewport['width']}.png"), full_page=True)
        link.click()
        p.page.wait_for_selector(".an-values[open][data-shown$='@1']")
        assert p.non_local() == []
