"""Recorded values cited in prose (annotate.pages.lesson_values) on the committed mini trace."""
from __future__ import annotations

from pathlib import Path

import pytest

from annotate.errors import UserError
from annotate.pages.lesson_values import expand
from annotate.pages.tracefmt import num, sup_label
from annotate.pages.trace_set import TraceSet

from values_fixtures import mini, mini_set, repo_sources

REPO = Path(__file__).resolve().parents[1]

QWEN3 = "nanovllm/models/qwen3.py"
L156 = "hidden_states, residual = self.post_attention_layernorm(hidden_states, residual)"


def test_a_cited_value_is_the_recorded_norm_identity_and_a_link_to_its_layer() -> None:
    text = expand(f"x {{{{value qwen3.py › Qwen3DecoderLayer.forward › {L156} › residual › 2}}}} y",
                  "lesson.md", repo_sources(), mini_set())
    res = mini().at(QWEN3, 156, layer=2)[0].var("residual")
    assert text.startswith("x <span") and text.endswith("</span> y")
    assert f"= {num(res.norm)}" in text and f"≡ {sup_label(res.label)}" in text and "x₁⁽²⁾" in text
    assert 'href="source/nanovllm/models/qwen3.py.html#L156&amp;layer=2&amp;trace=cpu"' in text
    assert "qwen3.py:156 · 第 2 层 layer 2" in text


def test_without_a_trace_the_page_says_how_to_get_one() -> None:
    text = expand(f"{{{{value qwen3.py › Qwen3DecoderLayer.forward › {L156} › residual › 2}}}}", "lesson.md", repo_sources(),
                  TraceSet([]))
    assert "make site" in text and "{{value" not in text


@pytest.mark.parametrize("body, says", [
    ("qwen3.py › Qwen3DecoderLayer.forward › residual › 2", "five parts"),
    ("qwen3.py › Qwen3DecoderLayer.forward › x = nothing_here() › residual › 2", "not found"),
    (f"qwen3.py › Qwen3DecoderLayer.forward › {L156} › nonexistent › 2", "recorded no 'nonexistent'"),
    (f"qwen3.py › Qwen3DecoderLayer.forward › {L156} › residual › two", "not a number"),
    (f"nope.py › Qwen3DecoderLayer.forward › {L156} › residual › 2", "no such vendored file"),
])
def test_a_bad_placeholder_is_one_line_naming_page_and_line(body: str, says: str) -> None:
    with pytest.raises(UserError) as info:
        expand(f"line one\n{{{{value {body}}}}}", "lesson.md", repo_sources(), mini_set())
    msg = str(info.value)
    assert msg.startswith("docs/lesson.md:2: ") and says in msg and "\n" not in msg


def test_a_page_that_shows_the_syntax_in_code_keeps_it_verbatim() -> None:
    shown = "{{value no › such › placeholder › at › all}}"  # would fail the build if it were expanded
    real = f"{{{{value qwen3.py › Qwen3DecoderLayer.forward › {L156} › residual › 2}}}}"
    page = f"write `{shown}` like this: {real}\n\n```\n{shown}\n{real}\n```\n"
    text = expand(page, "lesson.md", repo_sources(), mini_set())
    lines = text.split("\n")
    assert lines[0].startswith(f"write `{shown}` like this: <span") and "{{value qwen3" not in lines[0]
    assert lines[2:6] == ["```", shown, real, "```"]


@pytest.mark.parametrize("layer", ["²", "٢", "1²"])
def test_a_layer_in_other_digits_is_one_line_not_a_traceback(layer: str) -> None:
    """`"²".isdigit()` is True but `int("²")` raises ValueError: only 0-9 are a layer."""
    with pytest.raises(UserError) as info:
        expand(f"{{{{value qwen3.py › Qwen3DecoderLayer.forward › {L156} › residual › {layer}}}}}", "lesson.md",
               repo_sources(), mini_set())
    msg = str(info.value)
    assert msg.startswith("docs/lesson.md:1: ") and "not a number" in msg and "0-9" in msg


@pytest.mark.parametrize("page", [
    f"see {{{{value qwen3.py › Qwen3DecoderLayer.forward › {L156} › residual › 2\n",
    f"{{{{value qwen3.py › Qwen3DecoderLayer.forward › {L156} › residual › 2}}}} and {{{{value qwen3.py\n",
    f"{{{{value qwen3.py › Qwen3DecoderLayer.forward › {L156} ›\nresidual › 2}}}}\n",
])
def test_an_unclosed_placeholder_is_refused_not_published(page: str) -> None:
    with pytest.raises(UserError) as info:
        expand(page, "lesson.md", repo_sources(), mini_set())
    msg = str(info.value)
    assert msg.startswith("docs/lesson.md:1: unclosed {{value") and "}}" in msg and "\n" not in msg


def test_an_unclosed_placeholder_shown_in_code_stays_verbatim() -> None:
    page = "write `{{value` to begin one\n\n```\n{{value\n```\n"
    assert expand(page, "lesson.md", repo_sources(), mini_set()) == page


def test_a_file_no_trace_records_is_named_not_told_to_record_a_trace() -> None:
    """HF's modeling file is vendored, but the traces record nano-vllm's lines: "record a trace first" was
    wrong while a trace existed. The error names the files the traces do record."""
    hf = next(p for p in repo_sources() if p.endswith("modeling_qwen3.py"))
    source = repo_sources()[hf]
    statement = next(s for s in source.statements if s.symbol == "Qwen3DecoderLayer.forward")
    body = f"modeling_qwen3.py › Qwen3DecoderLayer.forward › {statement.text} › hidden_states › 2"
    with pytest.raises(UserError) as info:
        expand(f"{{{{value {body}}}}}", "lesson.md", repo_sources(), mini_set())
    msg = str(info.value)
    assert f"no trace records lines of {hf}" in msg and QWEN3 in msg and "record a trace first" not in msg
    assert "make site" in expand(f"{{{{value {body}}}}}", "lesson.md", repo_sources(), TraceSet([]))


def test_an_empty_placeholder_asks_for_its_five_parts() -> None:
    with pytest.raises(UserError, match=r"^docs/lesson.md:1: .*needs five parts"):
        expand("{{value}}", "lesson.md", repo_sources(), mini_set())
