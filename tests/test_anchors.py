"""Anchors resolve by symbol + statement, never by line; moved/changed/vanished are told apart."""
from __future__ import annotations

from pathlib import Path

from annotate.anchors import AMBIGUOUS, CHANGED, EXACT, MOVED, VANISHED, Anchor, compare, resolve
from annotate.source import load, parse

REPO = Path(__file__).resolve().parents[1]
LAYERNORM = REPO / "vendor/nano-vllm/nanovllm/layers/layernorm.py"
PATH = "nanovllm/layers/layernorm.py"


def test_exact_on_the_real_file() -> None:
    src = load(LAYERNORM, PATH)
    got = resolve(Anchor(PATH, "RMSNorm.add_rms_forward", "residual = x.to(orig_dtype)"), src)
    assert got.state == EXACT and got.span == (36, 36) and got.ok


def test_nth_picks_the_repeated_statement() -> None:
    src = load(LAYERNORM, PATH)
    text = "var = x.pow(2).mean(dim=-1, keepdim=True)"
    assert resolve(Anchor(PATH, "RMSNorm.rms_forward", text), src).span == (23, 23)
    assert resolve(Anchor(PATH, "RMSNorm.add_rms_forward", text), src).span == (37, 37)
    assert resolve(Anchor(PATH, "RMSNorm.add_rms_forward", text, nth=1), src).state == CHANGED


def test_moved_when_lines_are_inserted_above() -> None:
    text = LAYERNORM.read_text()
    old = parse(text, PATH)
    new = parse("# one\n# two\n# three\n" + text, PATH)
    got = compare(Anchor(PATH, "RMSNorm.add_rms_forward", "residual = x.to(orig_dtype)"), old, new)
    assert got.state == MOVED and got.span == (39, 39)
    assert got.describe() == "moved 36 → 39"


def test_changed_lists_nearest_candidates() -> None:
    text = LAYERNORM.read_text().replace("residual = x.to(orig_dtype)", "residual = x.to(dtype=orig_dtype)")
    got = resolve(Anchor(PATH, "RMSNorm.add_rms_forward", "residual = x.to(orig_dtype)"), parse(text, PATH))
    assert got.state == CHANGED and not got.ok
    assert got.candidates[0] == (36, "residual = x.to(dtype=orig_dtype)")


def test_vanished_when_the_symbol_is_gone() -> None:
    text = LAYERNORM.read_text().replace("def add_rms_forward", "def fused_add_rms")
    got = resolve(Anchor(PATH, "RMSNorm.add_rms_forward", "return x, residual"), parse(text, PATH))
    assert got.state == VANISHED and "add_rms_forward" in got.describe()
    assert resolve(Anchor(PATH, "RMSNorm.forward"), None).state == VANISHED


def test_symbol_only_anchor_spans_decorator_to_end() -> None:
    got = resolve(Anchor(PATH, "RMSNorm.add_rms_forward"), load(LAYERNORM, PATH))
    assert got.span == (28, 40)


def test_a_repeated_statement_without_nth_is_ambiguous_and_lists_every_occurrence() -> None:
    """An anchor whose holder wrote no `nth` is never bound to the first occurrence silently."""
    text = "x = 1\ny = 2\nx = 1\n"
    src = parse(f"def f():\n    {text.replace(chr(10), chr(10) + '    ')}pass\n", "m.py")
    got = resolve(Anchor("m.py", "f", "x = 1", nth_set=False), src)
    assert got.state == AMBIGUOUS and not got.ok and got.span is None
    assert [line for line, _ in got.candidates] == [2, 4]
    assert got.describe().startswith("ambiguous: the statement occurs 2 times in f (lines 2, 4); add `nth:`")
    assert resolve(Anchor("m.py", "f", "x = 1", nth=1, nth_set=True), src).span == (4, 4)
    assert resolve(Anchor("m.py", "f", "y = 2", nth_set=False), src).state == EXACT      # once: no nth needed
    assert resolve(Anchor("m.py", "f", "x = 1"), src).span == (2, 2)     # nth_set defaults to True (nth 0)
