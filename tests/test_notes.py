"""Notes files: loading with precise errors, anchors (notes + prose references), the check report."""
from __future__ import annotations

from pathlib import Path

import pytest

from annotate.anchors import CHANGED, EXACT, VANISHED
from annotate.cli import main
from annotate.errors import UserError
from annotate.notes import load_all, parse_notes, vet_math
from annotate.project_anchors import all_anchors, check
from annotate.project import Project
from annotate.render.katex import shared

pytest_plugins = ["site_fixtures"]

REPO = Path(__file__).resolve().parents[1]
LAYERNORM = "nanovllm/layers/layernorm.py"
NOTES = f"notes/{LAYERNORM}.yml"

GOOD = """\
notes:
  - symbol: RMSNorm.add_rms_forward
    statement: residual = x.to(orig_dtype)
    math: 'r \\leftarrow \\mathrm{bf16}(s)'
    vars: {residual: x_1}
    zh: 更新残差
    en: updates the residual
  - symbol: RMSNorm
    zh: 类本身
"""


def write_notes(root: Path, text: str, path: str = LAYERNORM) -> Path:
    """Replace the project's notes by one file with ``text``."""
    import shutil

    shutil.rmtree(root / "notes")
    target = root / "notes" / f"{path}.yml"
    target.parent.mkdir(parents=True)
    target.write_text(text, encoding="utf-8")
    return target


# --- the real notes -------------------------------------------------------------------------


def test_real_notes_load_and_all_resolve_exactly() -> None:
    files = load_all(REPO)
    assert [f.path for f in files] == ["nanovllm/layers/activation.py", "nanovllm/layers/layernorm.py",
                                       "nanovllm/models/qwen3.py", "transformers/models/qwen3/modeling_qwen3.py",
                                       "vllm/ir/ops/layernorm.py", "vllm/model_executor/models/qwen2.py",
                                       "vllm/model_executor/models/qwen3.py"]
    report = check(Project.load(REPO), math_check=shared(REPO).check)
    assert report.ok, report.render()
    assert set(report.counts()) == {EXACT}


REQUIRED = {
    LAYERNORM: ["RMSNorm.rms_forward", "RMSNorm.add_rms_forward", "RMSNorm.forward"],
    "nanovllm/layers/activation.py": ["SiluAndMul.forward"],
    "nanovllm/models/qwen3.py": ["Qwen3MLP.__init__", "Qwen3MLP.forward", "Qwen3DecoderLayer.forward",
                                 "Qwen3Model.forward"],
}


@pytest.mark.parametrize("path", sorted(REQUIRED))
def test_every_statement_of_the_required_functions_has_a_note(path: str) -> None:
    from annotate.source import load

    source = load(REPO / "vendor/nano-vllm" / path, path)
    noted = {(n.anchor.symbol, n.anchor.statement and " ".join(n.anchor.statement.split()))
             for f in load_all(REPO) if f.path == path for n in f.notes}
    for symbol in REQUIRED[path]:
        for stmt in source.statements_in(symbol):
            if stmt.kind == "function_definition":
                continue
            assert (symbol, stmt.text) in noted, f"{path}: {symbol} line {stmt.start_line} has no note"


def test_decoder_notes_say_the_mlp_output_is_not_x2() -> None:
    qwen3 = next(f for f in load_all(REPO) if f.path == "nanovllm/models/qwen3.py")
    mlp = next(n for n in qwen3.notes if n.anchor.statement == "hidden_states = self.mlp(hidden_states)")
    assert "m^{(\\ell)}" in mlp.vars["hidden_states"] and "\\neq x_2" in mlp.vars["hidden_states"]
    final = next(n for n in qwen3.notes if n.anchor.statement == "hidden_states, _ = self.norm(hidden_states, residual)")
    assert final.vars["_"] == "x_2^{(L-1)}"


def test_all_anchors_holds_notes_and_prose_references_with_origins() -> None:
    anchors = all_anchors(REPO)
    origins = [a.origin for a in anchors]
    assert f"{NOTES}: note 1" in origins
    assert any(o.startswith("docs/index.md:") for o in origins)
    ref = next(a for a in anchors if a.origin.startswith("docs/") and a.statement == "residual = x.to(orig_dtype)")
    assert ref.path == LAYERNORM and ref.symbol == "RMSNorm.add_rms_forward"


# --- parsing --------------------------------------------------------------------------------


def test_parse_keeps_fields_and_numbers_notes() -> None:
    f = parse_notes(GOOD, LAYERNORM, NOTES)
    first, second = f.notes
    assert first.anchor.origin == f"{NOTES}: note 1" and first.yaml_line == 2
    assert first.vars == {"residual": "x_1"} and first.math.startswith("r \\leftarrow")
    assert second.on_symbol and second.anchor.statement is None and second.index == 2


@pytest.mark.parametrize("text, message", [
    ("notes:\n  - symbol: [unclosed\n", rf"^{NOTES}:3:1: malformed YAML"),
    ("notes:\n  - symbol: A\n    zh: x\n    zh: y\n", rf"^{NOTES}:4:5: malformed YAML.*duplicate key 'zh'"),
    ("notes:\n  - symbol: A\n    mth: 1\n    zh: x\n", rf"^{NOTES}:2: note 1: unknown key 'mth'.*allowed keys"),
    ("title: x\nnotes: []\n", rf"^{NOTES}:1: unknown key 'title' in top level"),
    ("notes: {}\n", "must be a list"),
    ("notes:\n  - zh: x\n", r"note 1: `symbol:` is required"),
    ("notes:\n  - symbol: A\n    statement: x = 1\n    nth: -1\n    zh: x\n", r"`nth:` must be a whole number"),
    ("notes:\n  - symbol: A\n", r"note 1: the note is empty"),
    ("notes:\n  - symbol: A\n    vars: [x]\n    zh: x\n", r"`vars:` must map"),
    ("notes:\n  - symbol: A\n    statement: x = 1\n    zh: a\n  - symbol: A\n    statement: 'x  =  1'\n    zh: b\n",
     rf"^{NOTES}:5: note 2 duplicates note 1"),
])
def test_bad_notes_are_one_line_errors(text: str, message: str) -> None:
    with pytest.raises(UserError, match=message) as info:
        parse_notes(text, LAYERNORM, NOTES)
    assert "\n" not in str(info.value)


def test_same_statement_with_other_nth_is_not_a_duplicate() -> None:
    text = "notes:\n  - symbol: A\n    statement: x = 1\n    zh: a\n  - symbol: A\n    statement: x = 1\n    nth: 1\n    zh: b\n"
    assert len(parse_notes(text, LAYERNORM, NOTES).notes) == 2


def test_notes_for_a_file_not_in_the_vendor(project: Path) -> None:
    write_notes(project, GOOD, path="nanovllm/layers/nope.py")
    with pytest.raises(UserError, match=r"notes/nanovllm/layers/nope.py.yml: nanovllm/layers/nope.py is not a vendored file"):
        load_all(project)


def test_latex_katex_cannot_parse_names_file_note_and_message() -> None:
    f = parse_notes("notes:\n  - symbol: A\n    math: '\\frac{a'\n", LAYERNORM, NOTES)
    with pytest.raises(UserError, match=rf"^{NOTES}:2: note 1 `math`: KaTeX parse error: .*expected '}}'"):
        vet_math([f], shared(REPO).check)


# --- resolution -----------------------------------------------------------------------------


def test_unknown_symbol_is_vanished_and_missing_statement_is_changed(project: Path) -> None:
    write_notes(project, """\
notes:
  - symbol: RMSNorm.gone
    zh: x
  - symbol: RMSNorm.add_rms_forward
    statement: residual = x.to(torch.bfloat16)
    zh: y
""")
    report = check(Project.load(project))
    states = [e.resolution.state for e in report.entries if e.resolution.anchor.origin.startswith("notes/")]
    assert states == [VANISHED, CHANGED] and not report.ok
    changed = report.problems[1].line()
    assert changed.startswith(f"{NOTES}: note 2: {LAYERNORM} › RMSNorm.add_rms_forward › residual = x.to(torch.bfloat16): changed")
    assert "L36: residual = x.to(orig_dtype)" in changed


def test_check_command_prints_one_line_per_anchor_and_exits_by_strictness(project: Path, capsys) -> None:
    write_notes(project, GOOD)
    assert main(["--root", str(project), "check", "--strict"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"{NOTES}: note 1: {LAYERNORM} › RMSNorm.add_rms_forward › residual = x.to(orig_dtype): exact at line 36"
    write_notes(project, GOOD.replace("orig_dtype)", "torch.half)"))
    assert main(["--root", str(project), "check"]) == 0
    assert main(["--root", str(project), "check", "--strict"]) == 1
    assert "changed" in capsys.readouterr().out


def test_check_command_bad_yaml_exits_2_with_one_line(project: Path, capsys) -> None:
    write_notes(project, "notes:\n  - symbol: [\n")
    assert main(["--root", str(project), "check"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"annotate: error: {NOTES}:3:1: malformed YAML") and "\n" not in err


def test_a_note_on_a_repeated_statement_without_nth_is_ambiguous(project: Path) -> None:
    """`var = x.pow(2).mean(...)` occurs once per method of RMSNorm; in a symbol where a text repeats, a note
    without `nth:` is reported with every occurrence (the map's anchors are read the same way)."""
    from annotate.anchors import AMBIGUOUS, resolve
    from annotate.source import parse

    text = "notes:\n  - symbol: A\n    statement: x = 1\n    zh: a\n"
    note = parse_notes(text, LAYERNORM, NOTES).notes[0]
    assert not note.anchor.nth_set
    got = resolve(note.anchor, parse("class A:\n    x = 1\n    y = 2\n    x = 1\n", LAYERNORM))
    assert got.state == AMBIGUOUS and "lines 2, 4" in got.describe()
    explicit = parse_notes(text.replace("    zh: a", "    nth: 0\n    zh: a"), LAYERNORM, NOTES).notes[0]
    assert explicit.anchor.nth_set and resolve(explicit.anchor, parse("class A:\n    x = 1\n    x = 1\n", LAYERNORM)).ok
