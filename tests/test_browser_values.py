"""The values panel, flow diagram and plots in a real headless Chromium, opened from disk (file://).

The site is built once from a scratch project whose traces/ holds this checkout's traces (or the
tiny session trace). Each test keeps screenshots under test-artifacts/.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from annotate.pages.base.tracefmt import sup_label
from annotate.trace.format.store import load_trace

from browser_helpers import DESKTOP, PHONE, Visit, visiting

pytest_plugins = ["site_fixtures", "browser_fixtures", "values_fixtures"]
pytestmark = pytest.mark.browser

pytest.importorskip("playwright.sync_api")

QWEN3 = "nanovllm/models/qwen3.py"


@pytest.fixture
def page(browser, traced_site: Path) -> Iterator[Visit]:
    p = Visit(browser, traced_site, DESKTOP)
    yield p
    p.close()


def shown_identity(p: Visit, var: str) -> tuple[str, str]:
    """(data-layer of the identity, its text) of `var` in the visible view of line 156's panel."""
    loc = p.page.locator(f"#values-L156 .an-view .an-var[data-var='{var}'] .an-id")
    assert loc.count() == 1 and loc.is_visible()
    return loc.get_attribute("data-layer"), loc.inner_text()


def test_line_156_panel_switches_layer_and_matches_the_trace(page: Visit, traced_project: Path, artifacts: Path) -> None:
    trace = load_trace(traced_project / "traces" / "cpu")
    page.open(f"source/{QWEN3}.html", "#L156")
    toggle = page.page.locator("#values-L156 > summary")                # the panel's one tab stop
    assert page.page.locator("#L156 .an-ln").get_attribute("tabindex") == "-1"
    toggle.focus()
    page.page.keyboard.press("Enter")                                   # keyboard opens the panel
    page.page.wait_for_selector("#values-L156[open] .an-rec")
    page.page.wait_for_function("document.querySelector('#values-L156 > summary').getAttribute('aria-expanded') === 'true'")
    page.page.locator("#values-L156").scroll_into_view_if_needed()
    page.page.screenshot(path=str(artifacts / "values-panel-L156.png"))
    seen = []
    for layer in trace.layers()[1:] + trace.layers()[:1]:
        page.page.select_option("#values-L156 .an-layer-select", str(layer))
        # a layer's values load on demand (a script per layer): read the panel once it shows that layer, not the
        # one before it (a fresh clone's loaded run read layer 2 where 3 was chosen)
        page.page.wait_for_selector(f"#values-L156[data-shown$='/{layer}'] .an-rec")
        got_layer, text = shown_identity(page, "residual")
        expected = trace.at(QWEN3, 156, layer=layer)[0].var("residual")
        assert got_layer == str(expected.matched["layer"]) == str(layer)
        assert text.startswith(f"≡ {sup_label(expected.label)}")
        seen.append(text)
    assert len(set(seen)) == len(seen)                                   # the identity changed with the layer
    page.page.screenshot(path=str(artifacts / "values-panel-L156-layer0.png"))
    # every other panel of the page follows the layer choice
    page.page.click("#L154 .an-code")
    page.page.wait_for_selector("#values-L154[open][data-shown]")
    assert page.page.locator("#values-L154 .an-layer-select").input_value() == str(trace.layers()[0])
    page.page.click("#L156 .an-code")                                   # a click closes it again
    assert not page.page.eval_on_selector("#values-L156", "d => d.open")
    assert page.non_local() == []


def test_trace_switch_when_several_traces(page: Visit, traced_project: Path) -> None:
    folders = sorted(p.name for p in (traced_project / "traces").iterdir() if (p / "trace.json").is_file())
    if len(folders) < 2:
        pytest.skip("one trace only: no trace switch")
    page.open(f"source/{QWEN3}.html")
    page.page.click("#L156 .an-code")
    options = page.page.eval_on_selector_all(".an-page-trace select option", "os => os.map(o => o.value)")
    assert options[0] == "cpu" and set(options) <= set(folders)
    page.page.select_option(".an-page-trace select", options[1])
    page.page.wait_for_selector(f"#values-L156[data-shown^='{options[1]}/']")
    prov = page.page.locator("#values-L156 .an-view .an-prov").inner_text()
    assert prov == "来源 Provenance: " + load_trace(traced_project / "traces" / options[1]).provenance()
    page.page.evaluate("localStorage.clear()")


def test_flow_diagram_and_plots_render(page: Visit, traced_project: Path, artifacts: Path) -> None:
    page.open("trace/index.html")
    svg = page.page.locator("svg.an-flow")
    box = svg.bounding_box()
    assert box and box["width"] > 300 and box["height"] > 500
    trace = load_trace(traced_project / "traces" / "cpu")
    last = trace.layers()[-1]
    labels = svg.text_content()
    assert "input_layernorm" in labels and sup_label(f"x₂⁽{last}⁾") in labels
    href = page.page.eval_on_selector("svg.an-flow g.an-step[data-line='156']", "g => g.parentElement.getAttribute('href')")
    assert f"source/{QWEN3}.html#L156&layer=" in href
    page.page.add_style_tag(content=".md-header { position: static; }")   # keep the sticky header off the shot
    svg.screenshot(path=str(artifacts / "values-flow-diagram.png"))
    for img in ("norms.svg", "hf-diff.svg"):
        loc = page.page.locator(f"img[src='{img}']")
        loc.scroll_into_view_if_needed()
        assert page.page.eval_on_selector(f"img[src='{img}']", "i => i.complete && i.naturalWidth > 100")
        loc.screenshot(path=str(artifacts / f"values-plot-{img.replace('.svg', '')}.png"))
    page.page.click("svg.an-flow g.an-step[data-line='156']")
    page.page.wait_for_selector("#L156.an-hl")
    assert page.non_local() == []


def test_kernel_and_numerics_pages_load_offline(page: Visit, artifacts: Path) -> None:
    for name in ("kernels", "numerics"):
        page.open(f"trace/{name}.html")
        assert page.page.locator("table, pre").count() > 0
        # the kernels page holds every captured kernel's source (~2 MB): a full-page picture of it took over 30 s
        # on a busy fresh machine and failed the run; its first screen shows what the artifact is for
        page.page.screenshot(path=str(artifacts / f"values-{name}.png"), full_page=name != "kernels")
        if name == "kernels":   # a kernel shown closed loads its code when opened (docs/js/kernels.js), from disk
            closed = page.page.locator("details.an-kernel:not([open])").first.element_handle()
            assert closed.query_selector(":scope > .an-kernel-lazy") and not closed.query_selector("pre")
            closed.query_selector("summary").click()
            page.page.wait_for_function("d => d.open && !d.querySelector(':scope > .an-kernel-lazy')"
                                        " && d.querySelector(':scope > .highlight pre code')", arg=closed)
            assert closed.query_selector("pre code").inner_text().strip()
    assert page.non_local() == []


def test_panel_reads_on_a_phone(browser, traced_site: Path, artifacts: Path) -> None:
    with visiting(browser, traced_site, PHONE) as p:
        p.open(f"source/{QWEN3}.html", "#L156")
        p.page.click("#L156 .an-code")
        panel = p.page.locator("#values-L156")
        panel.scroll_into_view_if_needed()
        box = panel.bounding_box()
        assert box and box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"]
        assert p.page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
        p.page.screenshot(path=str(artifacts / "values-panel-phone.png"))
