"""Source pages: per-line highlighting, note placement, permalinks, banner, extras hook, goldens."""
from __future__ import annotations

import html
import re
from pathlib import Path


from annotate.pages.base.extras import NoExtras
from annotate.pages.source.generate import generate
from annotate.pages.base.snapshot import build_snapshot
from goldens import compare_golden
from annotate.pages.base.highlight import highlight_lines
from annotate.safe_html import prose, split_math

pytest_plugins = ["site_fixtures"]

REPO = Path(__file__).resolve().parents[1]
ACTIVATION = "nanovllm/layers/activation.py"
LAYERNORM = "nanovllm/layers/layernorm.py"
QWEN3 = "nanovllm/models/qwen3.py"
PIN = "2f214426530e2841e7d24c73ee0dfa914d62df56"


def stub_math(tex: str, display: bool) -> str:
    """Stands in for KaTeX so the golden page does not depend on KaTeX's markup."""
    return f'<span class="math{" display" if display else ""}">{html.escape(tex)}</span>'


def page(path: str, extras=(), root: Path = REPO) -> str:
    return generate(build_snapshot(root), stub_math, lambda tex: None, extras, only=[path]).pages[f"source/{path}.md"]


def rows(text: str) -> list[str]:
    """Ids of rows and note cards in page order: 'L36', 'note-4', …"""
    return re.findall(r'<(?:div class="an-row[^"]*"|h6 class="an-note-title") id="([^"]+)"', text)


# --- highlighting ---------------------------------------------------------------------------


def test_one_balanced_fragment_per_line() -> None:
    text = 'x = """a\nb"""\n\ny = 1  # c\n'
    lines = highlight_lines(text)
    assert len(lines) == 4 and lines[2] == ""
    for line in lines:
        assert line.count("<span") == line.count("</span>")
    assert re.sub(r"<[^>]+>", "", lines[1]) == 'b"""'  # the string's second line, closed on its own line


def test_real_file_has_one_fragment_per_line() -> None:
    text = (REPO / "vendor/nano-vllm" / QWEN3).read_text()
    assert len(highlight_lines(text)) == len(text.splitlines()) == 229


# --- prose ------------------------------------------------------------------------------------


def test_prose_renders_markdown_and_inline_math() -> None:
    out = prose("**这一行** 更新 `residual`: $x_1 = x + a$, cost $3HF$.", lambda t: f"<m>{t}</m>")
    assert out == "<p><strong>这一行</strong> 更新 <code>residual</code>: <m>x_1 = x + a</m>, cost <m>3HF</m>.</p>"


def test_dollar_amounts_and_escaped_dollars_are_not_math() -> None:
    assert split_math("costs \\$5 and $ 3 $")[1] == []


# --- placement, permalinks, banner ----------------------------------------------------------


def test_notes_follow_their_statement_and_symbol_notes_precede_the_symbol() -> None:
    order = rows(page(LAYERNORM))
    assert order.index("L36") < order.index("note-14") < order.index("L37")  # residual = x.to(orig_dtype)
    symbol_note = order.index("note-11")  # RMSNorm.add_rms_forward as a whole
    assert order.index("L27") < symbol_note < order.index("L28")


def test_qwen3_line_156_card_and_local_only_lines() -> None:
    text = page(QWEN3)
    order = rows(text)
    card = next(i for i, r in enumerate(order) if r.startswith("note-") and order[i - 1] == "L156")
    assert order[card + 1] == "L157"
    assert f'/blob/{PIN}/{QWEN3}#L156"' in text
    for line in (204, 210, 217):
        assert re.search(rf'<div class="an-row an-local" id="L{line}" data-line="{line}" title="local-only', text)
    assert '<div class="an-row" id="L218" data-line="218" data-upstream="204">' in text
    assert "local-only lines 204–217 have no upstream permalink" in text


def test_another_upstreams_rows_follow_their_own_pin() -> None:
    """HF's file is identical to its pin, so no row is local-only (rows asked nano-vllm's lock before)."""
    hf = "transformers/models/qwen3/modeling_qwen3.py"
    text = page(hf)
    classes = re.findall(r'<div class="(an-row[^"]*)" id="L\d+"', text)
    assert len(classes) > 500 and not [c for c in classes if "an-local" in c]
    assert "identical to upstream" in text and "local-only: this line" not in text


def test_every_symbol_has_a_permalink_or_says_local_only() -> None:
    text = page(QWEN3)
    start = text.index('<details class="an-symbols">')
    table = text[start:text.index("</details>", start)]
    assert f'{PIN}/{QWEN3}#L145-L158">upstream ↗' in table  # Qwen3DecoderLayer.forward
    embed = table[table.index("Qwen3ForCausalLM.embed_tokens"):]
    assert embed.index("local-only") < embed.index("</tr>")


def test_banner_states_source_pin_date_and_identity() -> None:
    text = page(LAYERNORM)
    assert "wheel nano-vllm-fork==20260210" in text
    assert f'title="{PIN}"' in text and "(2025-11-04)" in text
    assert "identical to upstream" in text


def test_page_data_blob_carries_notes_and_vars() -> None:
    import json

    text = page(QWEN3)
    blob = json.loads(re.search(r'<script type="application/json" id="an-page-data">(.*?)</script>', text).group(1))
    assert blob["path"] == QWEN3 and blob["upstream"]["ref"] == PIN and blob["upstream"]["file"].endswith(f"/blob/{PIN}/{QWEN3}")
    mlp = next(n for n in blob["notes"] if n["start"] == 157)
    assert mlp["vars"]["residual"] == "x_1^{(\\ell)}"


class FakePanel(NoExtras):
    """A values-panel provider as issue 5 will write one."""

    def line_html(self, path: str, line: int) -> str:
        return f'<div class="panel" data-for="{line}"></div>' if line == 36 else ""

    def page_data(self, path: str) -> dict:
        return {"trace": {"path": path}}


def test_extras_hook_adds_html_after_a_line_and_data_to_the_blob() -> None:
    text = page(LAYERNORM, extras=[FakePanel()])
    after = text[text.index('id="L36"'):]
    assert after.index('<div class="panel" data-for="36">') < after.index('id="L37"')
    assert '"trace": {"path": "nanovllm/layers/layernorm.py"}' in text


def test_unresolved_notes_are_left_off_and_reported(project: Path) -> None:
    notes = project / "notes" / f"{LAYERNORM}.yml"
    notes.write_text(notes.read_text().replace("residual = x.to(orig_dtype)", "residual = x.half()"))
    result = generate(build_snapshot(project), stub_math, lambda tex: None, only=[LAYERNORM])
    assert len(result.problems) == 1 and "note 14" in result.problems[0] and "changed" in result.problems[0]
    assert 'id="note-14"' not in result.pages[f"source/{LAYERNORM}.md"]


# --- goldens --------------------------------------------------------------------------------


def test_activation_page_markdown_matches_golden() -> None:
    compare_golden("activation.py.md", page(ACTIVATION))


def test_built_activation_code_block_matches_golden(built_site: Path) -> None:
    built = (built_site / f"source/{ACTIVATION}.html").read_text(encoding="utf-8")
    start = built.index('<div class="an-source highlight"')
    end = built.index('<script type="application/json" id="an-page-data">')
    compare_golden("activation.py.html", without_values_panels(built[start:end]).strip() + "\n")


def without_values_panels(text: str) -> str:
    """The code block as it is without traces: the values panels (issue 5, data from traces/ that
    `make site` regenerates) removed, and the code segments they split joined again."""
    panel = r'<details class="an-values".*?</details>'
    text = re.sub(rf'</div></div>(?:{panel})+<div class="an-seg"><div class="an-seg-inner">', "", text, flags=re.S)
    return re.sub(panel, "", text, flags=re.S)


def test_every_upstream_url_on_every_page_is_at_the_pin_with_the_repository_path(built_site: Path) -> None:
    """Every link into an upstream repository, on every built page and in the data the script builds its
    citations from (`upstream.file`), names a vendored file under the repository's own folder (HF's `src/`)
    at the lock's ref: vLLM at the commit its wheel names, HF at its tag."""
    from annotate.vendoring.registry import Registry

    registry = Registry(REPO)
    ups = [registry.lock(v).upstream for v in registry.all]
    by_name = {v.name: registry.lock(v).upstream for v in registry.all}
    assert by_name["vllm"].ref == "4ba787ec9" and by_name["transformers"].repo_path == "src/"
    seen = {u.repo: 0 for u in ups}
    for page in built_site.rglob("*.html"):
        text = html.unescape(page.read_text(encoding="utf-8"))
        for up in ups:
            base = up.repo.rstrip("/") + "/blob/"
            for url in re.findall(re.escape(base) + r"[^\s\"'<>)\\]+", text):
                ref, _, rest = url[len(base):].partition("/")
                path = rest.split("#")[0]
                assert ref == up.ref, f"{page}: {url} is not at the pin {up.ref}"
                assert path.startswith(up.repo_path) and path[len(up.repo_path):] in up.files, f"{page}: {url}"
                seen[up.repo] += 1
    assert all(seen.values()), seen   # every upstream is linked somewhere, so the check ran on each
    # the script's citations append `#L…` to `upstream.file` (checked above, in each page's data): it builds no URL
    script = (REPO / "docs/assets/annotate.js").read_text(encoding="utf-8")
    assert "/blob/" not in script and "up.file +" in script


def test_lean_math_strips_every_mathml_copy_and_names_each_statement() -> None:
    """A formula set as parts (katex.display_parts) keeps no hidden MathML in any part (search would index
    raw TeX), and each part's accessible name is its own statement's TeX (what a copied selection gets)."""
    from annotate.pages.source.source_page import lean_math
    from annotate.render.katex import Katex

    katex = Katex(Path(__file__).resolve().parents[1])
    try:
        out = lean_math(katex.render)(r"y = \mathrm{e}^x, \qquad x \in \mathbb{R}", True)
        one = lean_math(katex.render)(r"y = \mathrm{e}^x", True)
    finally:
        katex.close()
    assert "katex-mathml" not in out and "<annotation" not in out and out.count('class="katex-display"') == 2
    assert re.findall(r'aria-label="([^"]*)"', out) == [html.escape(r"y = \mathrm{e}^x,"), html.escape(r"x \in \mathbb{R}")]
    assert re.findall(r'aria-label="([^"]*)"', one) == [html.escape(r"y = \mathrm{e}^x")] and "katex-mathml" not in one


def test_every_page_writes_layers_in_one_notation(built_site: Path) -> None:
    """Issue 34 #15: a layer index is a superscript everywhere a reader looks (x₁⁽²⁾), never the store's
    x₁⁽2⁾ — except the trace-format page, which documents the stored labels as they are."""
    import re

    stray = {}
    for page in built_site.rglob("*.html"):
        rel = page.relative_to(built_site).as_posix()
        if rel == "trace-format.html":
            continue
        found = re.findall(r".{0,30}⁽[0-9]+⁾", page.read_text(encoding="utf-8"))
        if found:
            stray[rel] = found[:3]
    assert stray == {}
