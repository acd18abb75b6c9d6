"""HF transformers' page in a real Chromium (file://): the same values panel as nano-vllm's pages, its
comparison with nano-vllm's matching line, and citations that name HF transformers."""
from __future__ import annotations

from pathlib import Path

import pytest

from annotate.anchors import Anchor, resolve
from annotate.notes import Sources
from annotate.pages.base.tracefmt import num, sup_label
from annotate.trace.identify.hf_lines import HF_FILE
from annotate.trace.format.store import load_trace

from browser_helpers import DESKTOP, PHONE, Visit, visiting

pytest_plugins = ["site_fixtures", "browser_fixtures", "values_fixtures"]
pytestmark = pytest.mark.browser

pytest.importorskip("playwright.sync_api")

REPO = Path(__file__).resolve().parents[1]
QWEN3 = "nanovllm/models/qwen3.py"
LAYER = "Qwen3DecoderLayer.forward"


def hf_x1() -> int:
    """HF's first residual add (x₁), found by its statement."""
    return resolve(Anchor(HF_FILE, LAYER, "hidden_states = residual + hidden_states"), Sources(REPO).get(HF_FILE)).span[0]


def nano_x1() -> int:
    """nano-vllm's line that leaves x₁ in `residual`."""
    return resolve(Anchor(QWEN3, LAYER, "hidden_states, residual = self.post_attention_layernorm(hidden_states, residual)"),
                   Sources(REPO).get(QWEN3)).span[0]


def hf_row(project: Path, line: int, layer: int, var: str) -> dict:
    rows = load_trace(project / "traces" / "cpu").summary["hf_lines"]["lines"]
    return next(e for e in rows if e["line"] == line and e["layer"] == layer and e["var"] == var)


def open_hf(v: Visit, line: int, layer: int) -> None:
    v.open(f"source/{HF_FILE}.html", f"#L{line}&layer={layer}&trace=cpu")
    v.page.wait_for_selector(f"#values-L{line}[open] .an-view .an-rec")


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_hf_panel_shows_values_and_the_distance_to_nano_vllm(browser, traced_site: Path, traced_project: Path,
                                                          artifacts: Path, viewport: dict) -> None:
    line, layer = hf_x1(), 2
    row = hf_row(traced_project, line, layer, "hidden_states")
    with visiting(browser, traced_site, viewport) as v:
        open_hf(v, line, layer)
        var = v.page.locator(f"#values-L{line} .an-view .an-var[data-var='hidden_states']")
        assert var.locator(".an-id").inner_text().startswith(f"≡ {sup_label('x₁⁽2⁾')}")
        stats = var.locator(".an-stats").inner_text()
        assert f"‖·‖₂ = {num(row['norm'])}" in stats and num(row["head"][0], 4) in stats and str(row["shape"]) in stats
        link = var.locator(".an-vs-nano a.an-nano-link")
        assert link.get_attribute("href").endswith(f"{QWEN3.rsplit('/', 1)[1]}.html#L{nano_x1()}&layer={layer}&trace=cpu")
        assert f"qwen3.py:{nano_x1()}" in link.inner_text() and "residual" in link.inner_text()
        assert f"max |Δ| = {num(row['nano']['max_abs'])}（" in var.inner_text()   # the measured distance, not HF vs HF
        assert "equals (by comparison)" not in v.page.content()                        # the old static table is gone
        v.page.locator(f"#values-L{line}").scroll_into_view_if_needed()
        v.shot(artifacts, f"hf-panel-L{line}-{viewport['width']}")
        assert v.page.evaluate("document.scrollingElement.scrollWidth") <= viewport["width"]
        # the layer switch: the identity follows
        v.page.select_option(f"#values-L{line} .an-layer-select", "3")
        v.page.wait_for_selector(f"#values-L{line}[data-shown='cpu/3']")
        assert var.locator(".an-id").inner_text().startswith(f"≡ {sup_label('x₁⁽3⁾')}")
        # Esc inside the panel closes it; a click on the line opens it again
        v.page.locator(f"#values-L{line} .an-layer-select").focus()
        v.page.keyboard.press("Escape")
        assert not v.page.eval_on_selector(f"#values-L{line}", "d => d.open")
        v.page.click(f"#L{line} .an-code", position={"x": 4, "y": 4})   # (not on the note mark)
        assert v.page.eval_on_selector(f"#values-L{line}", "d => d.open")
        # the link lands on nano-vllm's line, its panel open at the same layer, holding the same math variable
        v.page.select_option(f"#values-L{line} .an-layer-select", str(layer))
        v.page.wait_for_selector(f"#values-L{line}[data-shown='cpu/{layer}']")
        link.click()
        v.page.wait_for_selector(f"#values-L{nano_x1()}[open] .an-view .an-var[data-var='residual']")
        nano = v.page.locator(f"#values-L{nano_x1()} .an-view .an-var[data-var='residual'] .an-id").inner_text()
        assert nano.startswith(f"≡ {sup_label('x₁⁽2⁾')}")
        assert v.non_local() == []


def test_hf_trace_switch_changes_the_hf_view(browser, traced_site: Path, traced_project: Path) -> None:
    line = hf_x1()
    with visiting(browser, traced_site, DESKTOP) as v:
        open_hf(v, line, 1)
        options = v.page.eval_on_selector_all(".an-page-trace select option", "os => os.map(o => o.value)")
        if len(options) < 2:
            pytest.skip("one trace only: no trace switch")
        other = options[1]
        v.page.select_option(".an-page-trace select", other)
        v.page.wait_for_selector(f"#values-L{line}[data-shown='{other}/1']")
        dtype = load_trace(traced_project / "traces" / other).meta["dtype"]
        assert dtype in v.page.locator(f"#values-L{line} .an-view .an-var .an-stats").first.inner_text()


def copy(v: Visit, button: str) -> None:
    """Click a 复制引用 button and wait until it says the citation is on the clipboard."""
    v.page.click(button)
    v.page.wait_for_function("b => b.textContent.includes('已复制')", arg=v.page.query_selector(button))


def test_hf_citations_name_hf_transformers(browser, traced_site: Path) -> None:
    line = hf_x1()
    with visiting(browser, traced_site, DESKTOP, clipboard=True) as v:
        open_hf(v, line, 2)
        copy(v, f"#values-L{line} .an-view .an-var[data-var='hidden_states'] button.an-cite")
        text = v.page.evaluate("navigator.clipboard.readText()")
        head, where, upstream = text.splitlines()[:3]
        assert head.endswith("· HF transformers") and "nano-vllm" not in head
        assert where.startswith(f"位置 where: {HF_FILE}:{line}") and upstream.startswith("上游 upstream: https://")
        assert f"对照 nano-vllm: qwen3.py:{nano_x1()} residual" in text and "‖·‖₂ = " in text
        v.open(f"source/{QWEN3}.html", f"#L{nano_x1()}&layer=2&trace=cpu")
        v.page.wait_for_selector(f"#values-L{nano_x1()}[open] .an-view .an-var")
        copy(v, f"#values-L{nano_x1()} .an-view .an-var[data-var='residual'] button.an-cite")
        assert v.page.evaluate("navigator.clipboard.readText()").splitlines()[0].endswith("· nano-vllm")
