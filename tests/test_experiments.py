"""Experiment files: read with one-line errors, applied by anchor to a scratch copy, never to vendor/."""
from __future__ import annotations

from pathlib import Path

import pytest

from annotate import experiments as ex
from annotate.anchors import Anchor
from annotate.errors import UserError
from annotate.notes import Sources
from annotate.anchors import resolve

REPO = Path(__file__).resolve().parents[1]
VENDOR = REPO / "vendor/nano-vllm"

GOOD = """\
title: {zh: 标题, en: Title}
hypothesis: {zh: 假设, en: Hypothesis}
baseline: {preset: tiny}
edits:
  - file: nanovllm/layers/activation.py
    symbol: SiluAndMul.forward
    statement: return F.silu(x) * y
    replace: return F.relu(x) * y
"""


def _exp(text: str = GOOD) -> ex.Experiment:
    return ex.parse_experiment(text, "t", "experiments/t.yml")


def _edit(statement: str, replace: list[str], symbol: str = "f", nth: int | None = None) -> ex.Edit:
    anchor = Anchor("m.py", symbol, statement, nth or 0, origin="experiments/t.yml: edit 1")
    return ex.Edit(anchor, tuple(replace), explicit_nth=nth is not None)


def test_reads_a_file() -> None:
    got = _exp()
    assert got.title == ex.Bilingual("标题", "Title") and got.baseline == {"preset": "tiny"}
    assert got.edits[0].replacement == ("return F.relu(x) * y",) and got.files == ["nanovllm/layers/activation.py"]


@pytest.mark.parametrize("text, expected", [
    (GOOD.replace("title: {zh: 标题, en: Title}\n", ""), "experiments/t.yml: $.title: missing"),
    (GOOD + "extra: 1\n", "experiments/t.yml: $.extra: expected one of the keys"),
    (GOOD.replace("    replace: return F.relu(x) * y\n", ""), "$.edits[0].replace: missing"),
    (GOOD.replace("{preset: tiny}", "{layers: 0}"), "$.baseline.layers: expected an integer >= 1"),
    (GOOD.replace("edits:", "edits: [\n"), "experiments/t.yml:"),
    (GOOD.replace("{zh: 假设,", '{zh: "a\\x07b",'), "$.hypothesis.zh: expected printable text (no control characters)"),
    (GOOD.replace("en: Title}", 'en: "T\\ud800"}'), "$.title.en: expected printable text"),
])
def test_bad_files_are_one_line(text: str, expected: str) -> None:
    with pytest.raises(UserError) as err:
        _exp(text)
    assert expected in str(err.value) and "\n" not in str(err.value)


SRC = "def f(x):\n    y = 1\n    y = 1\n    return y\n\n\ndef g():\n    pass\n"


def test_edit_text_replaces_by_anchor_with_the_indentation() -> None:
    text, spans = ex.edit_text(SRC, "m.py", [_edit("return y", ["z = y + 1", "return z"])])
    assert "    z = y + 1\n    return z\n" in text
    (applied,) = spans.values()
    assert applied.old_span == (4, 4) and applied.new_span == (4, 5)


def test_a_statement_that_matches_twice_needs_nth() -> None:
    with pytest.raises(UserError, match=r"matches 2 statements; add `nth:`"):
        ex.edit_text(SRC, "m.py", [_edit("y = 1", ["y = 2"])])
    text, _ = ex.edit_text(SRC, "m.py", [_edit("y = 1", ["y = 2"], nth=1)])
    assert text.splitlines()[1:3] == ["    y = 1", "    y = 2"]


def test_a_vanished_or_changed_anchor_is_one_line() -> None:
    with pytest.raises(UserError, match=r"edit 1: m.py: h › 'pass': vanished: symbol 'h' is gone"):
        ex.edit_text(SRC, "m.py", [_edit("pass", ["return"], symbol="h")])
    with pytest.raises(UserError, match=r"changed: statement not found in f"):
        ex.edit_text(SRC, "m.py", [_edit("y = 3", ["y = 2"])])


def test_an_edit_that_does_not_parse_is_refused() -> None:
    with pytest.raises(UserError, match=r"the edited m.py does not parse at line 4 \('return \(y'\)"):
        ex.edit_text(SRC, "m.py", [_edit("return y", ["return (y"])])


def test_overlapping_edits_are_refused() -> None:
    """Two edits of one statement (here: the same anchor twice) would each undo the other."""
    second = ex.Edit(Anchor("m.py", "f", "return y", origin="experiments/t.yml: edit 2"), ("return 2",))
    with pytest.raises(UserError, match="edit 2: overlaps experiments/t.yml: edit 1 at line 4"):
        ex.edit_text(SRC, "m.py", [_edit("return y", ["return 1"]), second])


def test_apply_writes_a_scratch_copy_and_leaves_vendor_alone(tmp_path: Path) -> None:
    before = (VENDOR / "nanovllm/layers/activation.py").read_bytes()
    landed = ex.apply(_exp(), VENDOR, tmp_path / "copy")
    assert (VENDOR / "nanovllm/layers/activation.py").read_bytes() == before
    edited = (tmp_path / "copy/nanovllm/layers/activation.py").read_text()
    assert "return F.relu(x) * y" in edited and "F.silu" not in edited
    assert (tmp_path / "copy/nanovllm/models/qwen3.py").read_bytes() == (VENDOR / "nanovllm/models/qwen3.py").read_bytes()
    assert landed[0].old_span == landed[0].new_span


def test_baseline_line_follows_the_edits() -> None:
    applied = [{"file": "a.py", "old_span": [4, 4], "new_span": [4, 5]},
               {"file": "a.py", "old_span": [9, 10], "new_span": [10, 10]}]
    assert [ex.baseline_line(applied, "a.py", n) for n in (3, 4, 5, 6, 10, 11)] == [3, 4, 4, 5, 9, 11]
    assert ex.baseline_line(applied, "b.py", 7) == 7


def test_the_shipped_experiments_resolve_and_apply(tmp_path: Path) -> None:
    """Every experiment under experiments/ reads, resolves exactly and applies to today's vendored copy."""
    found = ex.load_experiments(REPO)
    assert len(found) == 5
    sources = Sources(REPO)
    for anchor in ex.experiment_anchors(REPO):
        assert resolve(anchor, sources.get(anchor.path)).ok, anchor.label
    for i, experiment in enumerate(found):
        landed = ex.apply(experiment, VENDOR, tmp_path / str(i))
        assert len(landed) == len(experiment.edits)


def test_an_unknown_experiment_lists_the_known_ones() -> None:
    with pytest.raises(UserError, match="experiment 'nope': no experiments/nope.yml; known experiments: 1-unfused"):
        ex.load_experiment(REPO, "nope")


def test_a_title_is_one_line_and_a_hypothesis_keeps_its_breaks() -> None:
    got = _exp(GOOD.replace("{zh: 标题, en: Title}", '{zh: "标\\n\\n题", en: "a\\r\\nb\\u2028 c"}')
               .replace("en: Hypothesis}", 'en: "one\\n\\ntwo"}'))
    assert got.title == ex.Bilingual("标 题", "a b c") and got.hypothesis.en == "one\n\ntwo"


def _folder(tmp_path: Path, **files: str) -> Path:
    (tmp_path / "experiments").mkdir(parents=True)
    for name, text in files.items():
        (tmp_path / "experiments" / name).write_text(text, encoding="utf-8")
    return tmp_path


def test_hidden_files_and_editor_locks_are_no_experiments(tmp_path: Path) -> None:
    """`.hidden.yml` and an editor's lock file were listed, then refused as "does not exist" by check."""
    root = _folder(tmp_path, **{"a.yml": GOOD, ".hidden.yml": "not: [yaml", ".#a.yml": "lock", "~$a.yml": "lock"})
    assert ex.names(root) == ["a"]
    assert [x.name for x in ex.load_experiments(root)] == ["a"]


def test_a_name_with_html_characters_is_one_line_naming_the_file(tmp_path: Path) -> None:
    root = _folder(tmp_path, **{'<b onmouseover="x">.yml': GOOD})
    with pytest.raises(UserError) as err:
        ex.load_experiments(root)
    msg = str(err.value)
    assert msg.startswith('experiments/<b onmouseover="x">.yml: the name') and "rename the file" in msg and "\n" not in msg


def test_a_linked_experiment_file_is_refused_without_reading_it(tmp_path: Path) -> None:
    """The map's rule: a link's target is never read, so its bytes are never echoed in a message."""
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET: [not yaml", encoding="utf-8")
    root = _folder(tmp_path / "p")
    (root / "experiments" / "x.yml").symlink_to(secret)
    with pytest.raises(UserError) as err:
        ex.load_experiments(root)
    msg = str(err.value)
    assert msg.startswith("experiments/x.yml: is a symbolic link") and "TOP-SECRET" not in msg
    (root / "experiments" / "dangling.yml").symlink_to(tmp_path / "nowhere.yml")
    with pytest.raises(UserError, match="experiments/dangling.yml: is a symbolic link"):
        ex.load_experiment(root, "dangling")
