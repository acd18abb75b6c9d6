"""Recorded values cited in prose (annotate.pages.lesson.lesson_values) on the committed mini trace."""
from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

import pytest

from annotate.errors import UserError
from annotate.pages.lesson.lesson_values import expand
from annotate.pages.base.tracefmt import num, sup_label
from annotate.pages.base.trace_set import NOTICE_LOGGER, TraceSet, TraceView

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


def _device_view(without_layer: int | None = None) -> TraceView:
    """The mini trace relabelled as a committed GPU trace, optionally recorded without one layer (another shape)."""
    t = mini()
    records = [r for r in t.records if without_layer is None or r.layer != without_layer]
    meta = {**t.meta, "device": "cuda", "device_name": "NVIDIA H200"}
    return TraceView("cuda", dataclasses.replace(t, meta=meta, records=records, _index={}))


BODY = f"{{{{value qwen3.py › Qwen3DecoderLayer.forward › {L156} › residual › 2}}}}"


def test_without_the_default_trace_a_device_trace_that_fits_is_shown() -> None:
    text = expand(BODY, "lesson.md", repo_sources(), TraceSet([_device_view()]))
    res = mini().at(QWEN3, 156, layer=2)[0].var("residual")
    assert f"= {num(res.norm)}" in text and "trace=cuda" in text


def test_a_device_trace_of_other_layers_is_reported_not_fatal(caplog: pytest.LogCaptureFixture) -> None:
    """The issue's case: traces/cuda holds no layer 2 and there is no default trace. The page says so,
    the notice logger reports it (a strict build prints it without failing), nothing raises."""
    with caplog.at_level(logging.WARNING, logger=NOTICE_LOGGER):
        text = expand(f"before {BODY} after", "lesson.md", repo_sources(), TraceSet([_device_view(without_layer=2)]))
    assert text.startswith("before <span") and text.endswith("</span> after") and "{{value" not in text
    assert "traces/cuda" in text and "make site" in text
    notices = [r.getMessage() for r in caplog.records if r.name == NOTICE_LOGGER]
    assert len(notices) == 1 and notices[0].startswith("docs/lesson.md:1: ") and "layer 2" in notices[0]


def test_the_default_trace_is_the_one_the_lesson_names() -> None:
    """With traces/cpu there, a device trace is never consulted: a value the default lacks is the author's
    error (one line), even when the device trace has it."""
    default = mini_set().views[0]
    cut = TraceView("cpu", dataclasses.replace(default.trace, records=[r for r in default.trace.records if r.layer != 2],
                                               _index={}))
    with pytest.raises(UserError, match=r"traces/cpu recorded no 'residual'"):
        expand(BODY, "lesson.md", repo_sources(), TraceSet([cut, _device_view()]))
    text = expand(BODY, "lesson.md", repo_sources(), TraceSet([default, _device_view(without_layer=2)]))
    assert "trace=cpu" in text


@pytest.mark.slow
def test_a_device_trace_of_other_layers_never_fails_the_strict_build(tmp_path: Path,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    """End to end: a real trace of two layers (the lesson cites layer 2), relabelled as the committed
    traces/cuda, is the only trace; `annotate build` (strict) succeeds, the lesson says which trace lacks
    the value, and the build reports it on the notice logger."""
    import json
    import shutil

    from conftest import run_cli
    from site_fixtures import copy_project

    device = tmp_path / "cuda"
    rc, _, err = run_cli("trace", "--preset", "tiny", "--layers", "2", "--out", str(device))
    assert rc == 0, err
    payload = json.loads((device / "trace.json").read_text(encoding="utf-8"))
    payload["meta"].update(device="cuda", device_name="NVIDIA H200")
    (device / "trace.json").write_text(json.dumps(payload), encoding="utf-8")
    project = copy_project(tmp_path / "project")
    (project / "traces").mkdir()
    shutil.move(device, project / "traces" / "cuda")
    with caplog.at_level(logging.WARNING, logger=NOTICE_LOGGER):
        rc, _, err = run_cli("--root", str(project), "build", "--site-dir", str(tmp_path / "site"))
    assert rc == 0, err
    lesson = (tmp_path / "site" / "lesson.html").read_text(encoding="utf-8")
    assert "这些轨迹没有记录这个值" in lesson and "traces/cuda" in lesson
    notices = [r.getMessage() for r in caplog.records if r.name == NOTICE_LOGGER]
    assert any("no trace here (traces/cuda) recorded no 'residual'" in n for n in notices), notices


def test_a_cited_value_carries_its_citation_with_permalink_and_trace() -> None:
    from values_fixtures import repo_snapshot

    snap = repo_snapshot()
    text = expand(f"{{{{value qwen3.py › Qwen3DecoderLayer.forward › {L156} › residual › 2}}}}", "lesson.md",
                  repo_sources(), mini_set(), files=snap.files)
    assert "\n" not in text   # one line of Markdown: the citation's line breaks are entities
    cite = text.split('data-cite-text="', 1)[1].split('"', 1)[0].split("&#10;")
    res = mini().at(QWEN3, 156, layer=2)[0].var("residual")
    assert cite[0].endswith("· nano-vllm") and cite[1] == f"位置 where: {QWEN3}:156 · Qwen3DecoderLayer.forward"
    assert cite[2] == f"上游 upstream: {snap.files[QWEN3].permalink(156)}" and "/blob/" in cite[2]
    assert cite[3] == f"张量 tensor: residual ≡ {sup_label(res.label)} · 第 2 层 layer 2 · ‖·‖₂ = {num(res.norm)}"
    assert cite[4].startswith("运行 trace: ") and mini().provenance() in cite[4]
    assert 'class="an-cite" data-cite="text"' in text and "引用 cite" in text
