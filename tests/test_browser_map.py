"""The map page in real headless Chromium (file://): a click on each framework's statement lands on
that framework's source page with exactly the resolved line highlighted; HF's page shows its traced lines
(on the traced site: this checkout's traces, else the tiny session trace)."""
from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["site_fixtures", "browser_fixtures", "values_fixtures"]
pytestmark = pytest.mark.browser

pytest.importorskip("playwright.sync_api")

REPO = Path(__file__).resolve().parents[1]
#: (framework column, file, symbol, statement, nth): the x₁ step in each framework, resolved now
TARGETS = [
    ("nano-vllm", "nanovllm/models/qwen3.py", "Qwen3DecoderLayer.forward",
     "hidden_states, residual = self.post_attention_layernorm(hidden_states, residual)", 0),
    ("transformers", "transformers/models/qwen3/modeling_qwen3.py", "Qwen3DecoderLayer.forward",
     "hidden_states = residual + hidden_states", 0),
    ("vllm", "vllm/model_executor/models/qwen3.py", "Qwen3DecoderLayer.forward",
     "hidden_states, residual = self.post_attention_layernorm(hidden_states, residual)", 0),
]


@pytest.mark.parametrize("framework,path,symbol,statement,nth", TARGETS, ids=[t[0] for t in TARGETS])
def test_map_link_lands_on_the_highlighted_line(browser, built_site: Path, artifacts: Path, framework: str,
                                                path: str, symbol: str, statement: str, nth: int) -> None:
    from annotate.anchors import Anchor, resolve
    from annotate.notes import Sources

    line = resolve(Anchor(path, symbol, statement, nth), Sources(REPO).get(path)).span[0]
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    tab = context.new_page()
    tab.goto((built_site / "map.html").as_uri())
    tab.wait_for_load_state("load")
    assert "三框架映射" in tab.title()
    link = tab.locator(f'#step-x1-and-norm td[data-framework="{framework}"] a.an-map-line'
                       f'[href$="source/{path}.html#L{line}"]')
    assert link.count() == 1, f"no map link to {path}#L{line}"
    link.click()
    tab.wait_for_url(f"**/source/{path}.html#L{line}")
    tab.wait_for_selector(f"#L{line}.an-hl")
    highlighted = tab.eval_on_selector_all(".an-row.an-hl", "rows => rows.map(r => +r.dataset.line)")
    assert highlighted == [line]
    assert statement.split(" = ")[0] in tab.locator(f"#L{line}").inner_text()
    tab.screenshot(path=str(artifacts / f"map-{framework}.png"))
    context.close()


def test_hf_page_has_traced_values_panels(browser, traced_site: Path) -> None:
    """HF's own traced lines: the panel under the x₁ line opens and names x₁ for layer 0, Chinese first (the
    panel in detail: tests/test_browser_hf_values.py)."""
    from annotate.anchors import Anchor, resolve
    from annotate.notes import Sources

    path = "transformers/models/qwen3/modeling_qwen3.py"
    line = resolve(Anchor(path, "Qwen3DecoderLayer.forward", "hidden_states = residual + hidden_states"),
                   Sources(REPO).get(path)).span[0]
    page = traced_site / "source" / f"{path}.html"
    assert 'class="an-values an-hf-values"' in page.read_text(encoding="utf-8")
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    tab = context.new_page()
    tab.goto(page.as_uri() + f"#L{line}")
    panel = tab.locator(f"#values-L{line}")
    assert panel.count() == 1
    summary = panel.locator("summary")
    assert summary.inner_text().index("值 values") < summary.inner_text().index("HF")
    summary.click()
    assert panel.get_attribute("open") is not None
    tab.select_option(f"#values-L{line} .an-layer-select", "0")
    tab.wait_for_selector(f"#values-L{line}[data-shown$='/0']")
    assert "x₁⁽⁰⁾" in panel.locator(".an-view").inner_text()
    context.close()


#: where a rendered line of code may end: after these characters, or at a space
_BREAKS_JS = """els => els.flatMap(el => {
  const chars = [];
  const walk = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
  while (walk.nextNode()) {
    const node = walk.currentNode;
    for (let i = 0; i < node.length; i++) {
      const range = document.createRange();
      range.setStart(node, i); range.setEnd(node, i + 1);
      const rect = range.getClientRects()[0];
      if (rect) chars.push([node.data[i], rect.top]);
    }
  }
  const breaks = [];
  for (let i = 1; i < chars.length; i++)
    if (chars[i][1] > chars[i - 1][1] + 2) breaks.push(chars[i - 1][0] + chars[i][0] + ' in ' + el.textContent);
  return breaks;
})"""


def test_map_code_wraps_between_tokens_on_a_phone(browser, built_site: Path, artifacts: Path) -> None:
    """At phone width the map's narrow cells wrap statements after `.`, `(`, `,` or at a space, never
    inside an identifier (`embed_tokens(inpu|t_ids)`), as the source pages do."""
    context = browser.new_context(viewport={"width": 390, "height": 844})
    tab = context.new_page()
    tab.goto((built_site / "map.html").as_uri())
    tab.wait_for_load_state("load")
    breaks = tab.eval_on_selector_all(".an-map-stmt code", _BREAKS_JS)
    assert breaks, "no statement wrapped at 390 px: the test would prove nothing"
    inside = [b for b in breaks if not (b[0] in ".(, " or b[1] == " ")]
    assert not inside, f"{len(inside)} of {len(breaks)} wraps fall inside a token, e.g. {inside[:3]}"
    tab.screenshot(path=str(artifacts / "map-phone.png"), full_page=True)
    context.close()
