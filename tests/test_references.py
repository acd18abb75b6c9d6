"""Prose references: syntax, file lookup, code spans left alone, rendering through the line map."""
from __future__ import annotations

from pathlib import Path
from typing import Mapping

import pytest

from annotate.anchors import resolve
from annotate.links import FileFacts
from annotate.notes import Sources
from annotate.vendoring.sync import vendored_files
from annotate.pages.base.snapshot import build_snapshot
from annotate.references import (BadReference, broken, expand, find_references, parse_reference, render, scan_references, substitute,
                                 unresolved_message)

REPO = Path(__file__).resolve().parents[1]
FILES = vendored_files(REPO)
LAYERNORM = "nanovllm/layers/layernorm.py"
PIN = "2f214426530e2841e7d24c73ee0dfa914d62df56"
UPSTREAM = f"https://github.com/GeeeekExplorer/nano-vllm/blob/{PIN}"


@pytest.fixture(scope="module")
def links() -> Mapping[str, FileFacts]:
    """Every vendored file's facts, from the build's snapshot."""
    return build_snapshot(REPO).files


def one(text: str, page: str = "lesson.md"):
    refs = find_references(text, page, FILES)
    assert len(refs) == 1
    ref = refs[0]
    return ref, resolve(ref.anchor, Sources(REPO).get(ref.anchor.path))


def test_parse_file_tail_symbol_statement() -> None:
    file, anchor, label = parse_reference("layernorm.py › RMSNorm.add_rms_forward › residual = x.to(orig_dtype)", "a.md", 3, FILES)
    assert (file, anchor.path, anchor.symbol, anchor.statement, anchor.nth, label) == (
        "layernorm.py", LAYERNORM, "RMSNorm.add_rms_forward", "residual = x.to(orig_dtype)", 0, None)
    assert anchor.origin == "docs/a.md:3"


def test_parse_ascii_separator_nth_and_label() -> None:
    _, anchor, label = parse_reference("行 {line} | nanovllm/layers/layernorm.py > RMSNorm.rms_forward > x = x.float() (nth=0)",
                             "a.md", 1, FILES)
    assert anchor.statement == "x = x.float()" and anchor.nth == 0 and label == "行 {line}"


def test_statement_keeps_its_own_separators() -> None:
    _, anchor, _ = parse_reference("qwen3.py › Qwen3MLP.forward › x > y > z", "a.md", 1, FILES)
    assert anchor.statement == "x > y > z"


@pytest.mark.parametrize("body, message", [
    ("nope.py › A", r"docs/a.md:7: reference to 'nope.py': no such vendored file"),
    ("layernorm.py", r"docs/a.md:7: reference \[\[layernorm.py\]\] needs at least `file › symbol`"),
])
def test_bad_references_are_one_line_errors(body: str, message: str) -> None:
    with pytest.raises(BadReference, match=message):
        parse_reference(body, "a.md", 7, FILES)


def test_an_ambiguous_tail_asks_for_more_path() -> None:
    with pytest.raises(BadReference, match=r"'x.py' is ambiguous \(a/x.py, b/x.py\); write more of the path"):
        parse_reference("x.py › A", "a.md", 1, ["a/x.py", "b/x.py"])
    assert parse_reference("a/x.py › A", "a.md", 1, ["a/x.py", "b/x.py"])[1].path == "a/x.py"


def test_code_spans_and_fences_are_left_alone() -> None:
    text = "\n".join([
        "see `[[layernorm.py › RMSNorm]]` literally",
        "```text",
        "[[layernorm.py › RMSNorm]]",
        "```",
        "but [[layernorm.py › RMSNorm]] here",
    ])
    refs = find_references(text, "a.md", FILES)
    assert [r.line for r in refs] == [5]
    out = substitute(text, refs, lambda r: "LINK")
    assert out.splitlines()[0] == "see `[[layernorm.py › RMSNorm]]` literally"
    assert out.splitlines()[2] == "[[layernorm.py › RMSNorm]]"
    assert out.splitlines()[4] == "but LINK here"


def test_render_links_page_line_and_upstream_permalink(links: Mapping[str, FileFacts]) -> None:
    ref, res = one("x [[layernorm.py › RMSNorm.add_rms_forward › residual = x.to(orig_dtype)]] y")
    assert res.span == (36, 36)
    assert render(ref, res, links[ref.anchor.path], "lesson.md") == (
        f"[`layernorm.py:36`](source/{LAYERNORM}.md#L36)"
        f'<a class="an-upstream" href="{UPSTREAM}/{LAYERNORM}#L36" title="upstream at the pinned commit">↗</a>')


def test_render_symbol_range_from_a_nested_page_with_label(links: Mapping[str, FileFacts]) -> None:
    ref, res = one("[[{symbol} L{lines} | layernorm.py › RMSNorm.add_rms_forward]]", "deep/page.md")
    out = render(ref, res, links[ref.anchor.path], "deep/page.md")
    assert out.startswith(f"[RMSNorm.add_rms_forward L28–40](../source/{LAYERNORM}.md#L28-L40)")
    assert f"{UPSTREAM}/{LAYERNORM}#L28-L40" in out


def test_local_only_line_gets_no_permalink_and_says_so(links: Mapping[str, FileFacts]) -> None:
    ref, res = one("[[qwen3.py › Qwen3ForCausalLM.embed_tokens]]")
    out = render(ref, res, links[ref.anchor.path], "lesson.md")
    assert "github.com" not in out and "(local-only)" in out and "#L206-L208" in out


def test_unresolved_message_names_page_line_and_reference() -> None:
    ref, res = one("\n\n[[layernorm.py › RMSNorm.forward › return 42]]")
    assert not res.ok
    message = unresolved_message(ref, res)
    assert message.startswith("docs/lesson.md:3: reference [[layernorm.py › RMSNorm.forward › return 42]] does not resolve")
    assert "\n" not in message


def test_scan_docs_finds_the_index_references() -> None:
    refs = scan_references(REPO)
    assert any(r.page == "index.md" and r.anchor.statement == "residual = x.to(orig_dtype)" for r in refs)
    assert not any(r.page == "writing.md" and r.line < 55 for r in refs)  # the syntax shown in code is skipped


def test_label_braces_that_are_not_placeholders_stay_as_written(links: Mapping[str, FileFacts]) -> None:
    ref, res = one("[[$x_{1}$ 在第 {line} 行 | layernorm.py › RMSNorm.add_rms_forward › residual = x.to(orig_dtype)]]")
    assert render(ref, res, links[ref.anchor.path], "lesson.md").startswith(f"[$x_{{1}}$ 在第 36 行](source/{LAYERNORM}.md#L36)")


def test_line_numbers_survive_unicode_line_separators(links: Mapping[str, FileFacts]) -> None:
    """U+2028 is not a Markdown line break: the reference on line 2 must still be found and replaced."""
    text = "intro\u2028still line one\n[[layernorm.py › RMSNorm.add_rms_forward › residual = x.to(orig_dtype)]]\n"
    ref, res = one(text)
    assert ref.line == 2
    out = substitute(text, [ref], lambda r: render(r, res, links[r.anchor.path], "lesson.md"))
    assert "[[" not in out and "layernorm.py:36" in out and "\u2028" in out


def test_expand_replaces_a_pages_references_by_their_resolutions(links: Mapping[str, FileFacts]) -> None:
    text = "a [[layernorm.py › RMSNorm.add_rms_forward › residual = x.to(orig_dtype)]]\n\nb [[layernorm.py › RMSNorm.forward › return 42]]"
    refs = find_references(text, "lesson.md", FILES)
    resolved = [(r, resolve(r.anchor, Sources(REPO).get(r.anchor.path))) for r in refs]
    out = expand(text, "lesson.md", resolved, links).split("\n")
    assert out[0].startswith(f"a [`layernorm.py:36`](source/{LAYERNORM}.md#L36)")
    assert out[2] == "b " + broken(*resolved[1])


def test_a_broken_reference_is_shown_as_written_escaped_saying_why_chinese_first() -> None:
    ref, res = one("[[layernorm.py › RMSNorm.forward › return <b>42</b>]]")
    out = broken(ref, res)
    assert out.startswith('<span class="an-ref-broken" title="引用无法解析 reference does not resolve: ')
    assert "<b>" not in out and "&lt;b&gt;42&lt;/b&gt;" in out
    assert render(ref, res, None, "lesson.md") == out   # render() shows an unresolved reference the same way
