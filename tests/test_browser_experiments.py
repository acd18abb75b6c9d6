"""The experiment pages and the panels' compare action in real headless Chromium (file://), phone and desktop.

The site is built from a scratch project holding this checkout's experiments/ and traces (after `make site`:
the baselines and traces/experiments/); without them, the session's tiny trace is the baseline and the
ReLU experiment is recorded once in a fresh process (the edited package cannot share this process).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from annotate.anchors import Anchor, resolve
from annotate.notes import Sources
from annotate.pages.source.values import compare_anchor
from annotate.trace.format.store import find_traces

from browser_helpers import DESKTOP, PHONE, visiting

pytest_plugins = ["site_fixtures", "browser_fixtures", "values_fixtures"]
pytestmark = pytest.mark.browser

pytest.importorskip("playwright.sync_api")

REPO = Path(__file__).resolve().parents[1]
NAME = "3-relu"
ACTIVATION = "nanovllm/layers/activation.py"
TINY = "cpu-bfloat16-tiny-4L-12T"


@pytest.fixture(scope="module")
def lab_site(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Path:
    from annotate.cli.site import build_site
    from site_fixtures import copy_project_with_trace

    found = find_traces(REPO)
    # the experiment's baseline (the tiny trace) in place before the claims are seeded: they are keyed by the traces
    tiny = {} if any(t.name == TINY for t in found) else {TINY: request.getfixturevalue("tiny_trace").out}
    root = copy_project_with_trace(tmp_path_factory.mktemp("lab") / "project", *found, named=tiny)
    shutil.copytree(REPO / "experiments", root / "experiments")
    recorded = REPO / "traces" / "experiments" / NAME
    if recorded.is_dir() and not tiny:
        shutil.copytree(recorded, root / "traces" / "experiments" / NAME)
    else:
        done = subprocess.run([sys.executable, "-m", "annotate", "--root", str(root), "experiment", NAME, "--quiet"],
                              capture_output=True, text=True, timeout=900, env={**os.environ})
        assert done.returncode == 0, done.stderr
    build_site(root, root / "site", strict=True)
    return root / "site"


def _line() -> int:
    got = resolve(Anchor(ACTIVATION, "SiluAndMul.forward", "return F.silu(x) * y"), Sources(REPO).get(ACTIVATION))
    assert got.span is not None
    return got.span[0]


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_experiment_page_shows_the_edit_and_the_verdict(browser, lab_site: Path, artifacts: Path, viewport: dict) -> None:
    with visiting(browser, lab_site, viewport) as v:
        v.open(f"experiments/{NAME}.html")
        assert "ReLU" in v.page.title()
        verdict = v.page.locator(".an-exp-verdict")
        assert "no longer holds from layer 0 on" in verdict.inner_text() and "第 0 层" in verdict.inner_text()
        # the MLP identity broke from layer 0 (found from the data), x₁ still held in layer 0
        assert v.page.locator('.an-exp-fate[data-key="mlp"]').get_attribute("data-state") == "broken"
        assert "0" in v.page.locator('.an-exp-fate[data-key="x1"] td').nth(2).inner_text()
        assert v.page.locator("img[src$='.svg']:visible").evaluate("img => img.complete && img.naturalWidth > 0")
        assert v.page.evaluate("document.documentElement.scrollWidth") <= viewport["width"]
        v.shot(artifacts, f"experiment-{NAME}-{viewport['width']}")
        link = v.page.locator(".an-exp-edit a").first
        assert link.get_attribute("href").endswith(f"source/{ACTIVATION}.html#L{_line()}")
        link.click()
        v.page.wait_for_selector(f"#L{_line()}.an-hl")
        assert v.non_local() == []


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_panel_compare_action_opens_the_experiment_at_the_line(browser, lab_site: Path, artifacts: Path,
                                                                viewport: dict) -> None:
    line = _line()
    with visiting(browser, lab_site, viewport) as v:
        v.open(f"source/{ACTIVATION}.html", f"#L{line}")
        v.page.click(f"#L{line} .an-code")
        panel = v.page.locator(f"#values-L{line}")
        panel.wait_for(state="visible")
        compare = panel.locator(f'a.an-compare[href*="experiments/{NAME}.html"]')
        assert compare.count() == 1 and "对照实验" in panel.locator(".an-compare-line").inner_text()
        compare.click()
        anchor = compare_anchor(ACTIVATION, line)
        v.page.wait_for_url(f"**/experiments/{NAME}.html#{anchor}")
        row = v.page.locator(f"#{anchor}")
        assert row.count() == 1
        row.scroll_into_view_if_needed()
        assert row.is_visible()
        v.shot(artifacts, f"experiment-compare-{viewport['width']}")
        assert v.non_local() == []


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_lab_page_has_the_commands_and_the_budget(browser, lab_site: Path, artifacts: Path, viewport: dict) -> None:
    with visiting(browser, lab_site, viewport) as v:
        v.open("lab.html")
        assert "本地实验" in v.page.title()
        text = v.page.locator("article").inner_text()
        assert "annotate budget --model ~/models/Qwen3-0.6B" in text and "--device cuda" in text
        assert "annotate experiment 3-relu --device cuda" in text
        rows = v.page.locator("article table tbody tr")
        assert rows.count() == 6 and "GiB" in rows.first.inner_text()
        assert v.page.evaluate("document.documentElement.scrollWidth") <= viewport["width"]
        v.shot(artifacts, f"lab-{viewport['width']}")
        assert v.non_local() == []


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_route_keeps_progress_in_this_browser(browser, lab_site: Path, artifacts: Path, viewport: dict) -> None:
    with visiting(browser, lab_site, viewport) as v:
        v.open("lesson.html", "#10-self-assessment")
        v.page.check('input[name="sa-flow"][value="2"]')              # the lesson's own self-assessment
        v.open("route.html")
        steps = v.page.locator(".an-route input[type=checkbox]")
        assert steps.count() == 9                                       # lesson, exercises, check, 5 experiments, GPU
        said = v.page.locator(".an-route-sa").inner_text()
        assert said == "两个变量的数据流 the two variables：能讲给别人听 could teach it", said   # named, Chinese first
        steps.nth(0).check()
        steps.nth(3).check()
        assert v.page.locator(".an-route-done").inner_text() == "2"
        v.page.reload()
        v.page.wait_for_load_state("load")
        assert v.page.locator(".an-route-done").inner_text() == "2" and steps.nth(3).is_checked()
        href = v.page.locator('.an-route li[data-step="exp-1-unfused"] a').get_attribute("href")
        assert href == "experiments/1-unfused.html"
        # foreign values in the lesson's store (another script, a hand edit) are left out, never shown raw
        v.page.evaluate("""localStorage.setItem('annotate.lesson.decoder-block.v1',
            JSON.stringify({flow: {a: 1}, rmsnorm: "1", junk: "2", swiglu: [2]}))""")
        v.page.reload()
        said = v.page.locator(".an-route-sa").inner_text()
        assert said == "手算 RMSNorm by hand：大致可以 mostly", said
        assert v.page.evaluate("document.documentElement.scrollWidth") <= viewport["width"]
        v.shot(artifacts, f"route-{viewport['width']}")
        assert v.non_local() == []


ROWS_JS = """() => { document.querySelectorAll('details.an-exp-layer').forEach(d => { d.open = true; });
  const tables = [...document.querySelectorAll('table.an-exp-rows')];
  const cells = sel => tables.flatMap(t => [...t.querySelectorAll(sel)]);
  return {broken: cells('tbody code').filter(c => c.getClientRects().length > 1).map(c => c.textContent),
          numbers: cells('tbody td:nth-child(n+3):nth-child(-n+5)').filter(c => {
                    const r = document.createRange(); r.selectNodeContents(c); return r.getClientRects().length > 1; }).length,
          table: Math.max(...tables.map(t => t.getBoundingClientRect().width)),
          box: Math.min(...tables.map(t => t.closest('.an-exp-scroll').clientWidth)),
          scroll: Math.max(...tables.map(t => t.closest('.an-exp-scroll').scrollWidth)),
          right: Math.max(...tables.map(t => t.querySelector('thead th:last-child').getBoundingClientRect().right)),
          viewport: document.documentElement.clientWidth}; }"""


@pytest.mark.parametrize("viewport", [DESKTOP, {"width": 1600, "height": 1000}], ids=["1280", "1600"])
def test_line_by_line_table_reads_on_a_desktop(browser, lab_site: Path, artifacts: Path, viewport: dict) -> None:
    """No variable name or number breaks inside (`input_ids` was cut every two letters), and the last column is
    on screen: the table fits its box, nothing to scroll to."""
    with visiting(browser, lab_site, viewport) as v:
        v.open(f"experiments/{NAME}.html")
        got = v.page.evaluate(ROWS_JS)
        v.page.locator("details.an-exp-layer[open]").nth(1).screenshot(path=str(artifacts / f"experiment-rows-{viewport['width']}.png"))
    assert got["broken"] == [] and got["numbers"] == 0, got
    assert got["scroll"] <= got["box"] + 1 and got["right"] <= got["viewport"], got


FOLDS_JS = """() => {
  const folds = [...document.querySelectorAll('.an-folds > details.an-exp-layer')];
  const seen = rows => rows.filter(r => r.getClientRects().length > 0);
  return {height: document.documentElement.scrollHeight, width: document.documentElement.scrollWidth,
          open: folds.filter(d => d.open).length,
          switchShown: !!document.querySelector('.an-fold-switch input:checked') &&
                       document.querySelector('.an-fold-switch').getClientRects().length > 0,
          folds: folds.map(d => {
            d.open = true;
            const rows = [...d.querySelectorAll('tbody tr')];
            const cells = r => [...r.cells].map(c => c.textContent.trim());
            const got = {summary: d.querySelector('summary').textContent, differ: +d.dataset.differ, rows: rows.length,
                         same: rows.filter(r => r.hasAttribute('data-same')).map(cells),
                         differs: rows.filter(r => !r.hasAttribute('data-same')).map(cells),
                         shown: seen(rows).length,
                         tallest: Math.max(0, ...seen(rows).map(r => r.getBoundingClientRect().height)),
                         none: [...d.querySelectorAll('.an-fold-none')].filter(p => p.getClientRects().length).length};
            d.open = false;
            return got; })};
}"""


@pytest.mark.parametrize("viewport,scheme", [(DESKTOP, "light"), (PHONE, "light"), (PHONE, "dark")],
                         ids=["desktop", "phone", "phone-dark"])
def test_line_by_line_folds_by_layer_and_shows_the_rows_that_differ(browser, lab_site: Path, artifacts: Path,
                                                                    viewport: dict, scheme: str) -> None:
    """Issue 34 #14: the page was 51–55 phone screens, every row a 7-field card. Now every layer is a closed
    fold whose summary counts its rows; open, it shows the rows on which something differs (the ulps, an
    identity, or a row the experiment lost), and one tap on the switch shows every row."""
    with visiting(browser, lab_site, viewport, scheme) as v:
        v.open(f"experiments/{NAME}.html")
        got = v.page.evaluate(FOLDS_JS)
        assert got["open"] == 0 and got["switchShown"], got
        assert got["height"] <= 8 * viewport["height"], got["height"]       # a page of summaries, not of cards
        assert got["width"] <= viewport["width"]
        assert got["folds"] and sum(f["rows"] for f in got["folds"]) > 0
        for fold in got["folds"]:
            assert all(c[4] == "0" and c[5] == c[6] and c[3] != "—" for c in fold["same"]), fold["summary"]
            assert all(c[4] != "0" or c[5] != c[6] or c[3] == "—" for c in fold["differs"]), fold["summary"]
            assert fold["differ"] == len(fold["differs"]) and fold["shown"] == fold["differ"], fold
            words = (f"{fold['differ']} of {fold['rows']} rows differ" if fold["differ"]
                     else f"all {fold['rows']} rows identical")
            assert words in fold["summary"], fold["summary"]
            assert fold["none"] == (1 if fold["differ"] == 0 else 0), fold
            if viewport is PHONE:   # a compact card: where, the variable and its numbers, what each run found
                assert fold["tallest"] <= 150, fold["tallest"]
        v.page.locator(".an-fold-switch input").uncheck()
        every = v.page.evaluate(FOLDS_JS)
        assert [f["shown"] for f in every["folds"]] == [f["rows"] for f in got["folds"]]
        assert all(f["none"] == 0 for f in every["folds"])
        v.page.locator("details.an-exp-layer summary").first.click()
        v.shot(artifacts, f"experiment-folds-{viewport['width']}-{scheme}")
        assert v.non_local() == []


def test_an_address_naming_an_identical_row_opens_its_fold_and_shows_it(browser, lab_site: Path) -> None:
    """A compare link (#cmp-…) may name a row on which nothing differs: its fold opens and it shows, the
    switch stays on for the rest."""
    with visiting(browser, lab_site, PHONE) as v:
        v.open(f"experiments/{NAME}.html")
        target = v.page.evaluate("() => { const r = document.querySelector('.an-folds tr[data-same][id]'); "
                                 "return r ? r.id : null; }")
        if target is None:
            pytest.skip("this experiment has no identical row that a link names")
        v.open(f"experiments/{NAME}.html", f"#{target}")
        row = v.page.locator(f"#{target}")
        row.wait_for(state="visible")
        assert v.in_viewport(f"#{target}")
        assert v.page.locator("details.an-exp-layer[open]").count() == 1
        assert v.page.locator(".an-fold-switch input").is_checked()
