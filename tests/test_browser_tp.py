"""The rank switch of the values panels and the 张量并行 page in a real headless Chromium (file://),
phone and desktop, on a site built (strict) from the real `--preset tiny --tp 2` trace."""
from __future__ import annotations

from pathlib import Path

import pytest

from annotate.pages.base.tracefmt import num
from browser_helpers import DESKTOP, PHONE, visiting

pytest_plugins = ["site_fixtures", "browser_fixtures", "values_fixtures"]
pytestmark = [pytest.mark.browser, pytest.mark.slow]

pytest.importorskip("playwright.sync_api")

LINEAR = "nanovllm/layers/linear.py"
KEY = "cpu-tp2"


@pytest.fixture(scope="module")
def tp_site(tiny_trace_tp2, tiny_trace, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The TP trace and a one-rank trace beside it (`cpu`): the rank switch must follow the page's trace."""
    from annotate.cli.site import build_site
    from site_fixtures import copy_project_with_trace

    root = copy_project_with_trace(tmp_path_factory.mktemp("tp") / "project", tiny_trace_tp2.out, name=KEY,
                                   named={"cpu": tiny_trace.out})
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


def test_rank_switch_only_under_a_tp_trace(browser, tp_site: Path) -> None:
    """qwen3.py, recorded by both traces: under the one-rank `cpu` no rank is offered or named, even when the
    address asks for rank 1; the panel's own trace switch brings the ranks of the TP trace, Chinese first."""
    panel = "#values-L156"
    with visiting(browser, tp_site, DESKTOP) as p:
        p.open("source/nanovllm/models/qwen3.py.html", "#L156&layer=1&trace=cpu&rank=1")
        p.page.wait_for_selector(f"{panel}[open][data-shown='cpu/1']")
        state = p.page.locator(f"{panel} .an-values-state")
        assert "rank" not in state.inner_text() and "秩" not in state.inner_text()
        assert not p.page.locator(f"{panel} .an-rank-select").is_visible()
        assert p.page.locator(f"{panel} .an-trace-select").input_value() == "cpu"
        p.page.select_option(f"{panel} .an-trace-select", KEY)                  # the panel's own trace switch
        p.page.wait_for_selector(f"{panel}[data-shown='{KEY}/1@1']")
        rank = p.page.locator(f"{panel} .an-rank-select")
        assert rank.is_visible() and rank.input_value() == "1"
        assert rank.locator("option").all_inner_texts() == ["秩 rank 0 / 2", "秩 rank 1 / 2"]   # Chinese first
        assert "秩 rank 1 / 2" in state.inner_text()
        p.page.select_option(f"{panel} .an-trace-select", "cpu")
        p.page.wait_for_selector(f"{panel}[data-shown='cpu/1']")
        assert not rank.is_visible() and "rank" not in state.inner_text()
        assert "rank=" not in p.page.evaluate("location.hash")


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


TP_FOLDS_JS = """() => {
  const folds = [...document.querySelectorAll('.an-folds > details.an-tp-layer')];
  return {height: document.documentElement.scrollHeight, width: document.documentElement.scrollWidth,
          open: folds.filter(d => d.open).length,
          folds: folds.map(d => { d.open = true;
            const rows = [...d.querySelectorAll('tbody tr')];
            const got = {summary: d.querySelector('summary').textContent, rows: rows.length,
                         shown: rows.filter(r => r.getClientRects().length).length};
            d.open = false; return got; })};
}"""


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_tp_page_folds_its_long_tables_by_layer(browser, tp_site: Path, tiny_trace_tp2, viewport: dict) -> None:
    """Issue 34 #14: the shard table and the after-all_reduce table, one closed fold a layer whose summary
    counts what it holds; every shard of the trace is one tap away."""
    import json

    with visiting(browser, tp_site, viewport) as p:
        p.open("trace/tp.html")
        got = p.page.evaluate(TP_FOLDS_JS)
    parallel = json.loads((tiny_trace_tp2.out / "trace.json").read_text(encoding="utf-8"))["parallel"]
    assert got["open"] == 0 and got["width"] <= viewport["width"], got
    assert got["height"] <= 12 * viewport["height"], got["height"]
    assert all(f["shown"] == f["rows"] for f in got["folds"])
    shards = [f for f in got["folds"] if "shards found" in f["summary"] or "not found" in f["summary"]]
    assert sum(f["rows"] for f in shards) == len(parallel["shards"])
    differ = sum(1 for r in parallel["vs_tp1"] if r["max_abs"] > 0)
    assert sum(f["rows"] for f in got["folds"] if f not in shards) == differ
