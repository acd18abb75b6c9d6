"""What-if experiments: ``experiments/<name>.yml`` edits nano-vllm by anchor, on a scratch copy.

An experiment is a title and a hypothesis (zh first, en beside), the trace options of its baseline,
and one or more edits. An edit is an anchor exactly as notes use one (file › symbol › statement,
``nth``) plus the statement(s) that replace it. Resolution is :mod:`annotate.anchors`' own; applying
copies the vendored package into a scratch folder and rewrites only there, so ``vendor/`` is never
touched. Every problem is one line naming the experiment file, the edit and the fix: a YAML error,
an anchor that vanished, changed or matches twice, an edited file that no longer parses.

`annotate check` and `vendor update` resolve the same anchors (:func:`experiment_anchors`), so an
upstream change that moves or removes an edited statement is reported like a note's.
"""
from __future__ import annotations

import re
import shutil
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from annotate import codec
from annotate.anchors import Anchor, resolve
from annotate.errors import UserError
from annotate.notes import parse_yaml
from annotate.project import Project
from annotate.source import SourceFile, normalise, parse, syntax_error_line

EXPERIMENT_SUFFIX = ".yml"
EXPERIMENT_FIX = "fix the experiment file (see docs/experiment-format.md)"
#: trace options an experiment may pin for its baseline (the names of `annotate trace`'s options)
BASELINE_KEYS = ("preset", "dtype", "layers", "tokens", "seed")
_TOP_KEYS = ("title", "hypothesis", "baseline", "edits")
_EDIT_KEYS = ("file", "symbol", "statement", "nth", "replace")
#: an experiment's name (its file's stem) becomes a page, a URL and a command: letters, digits, `_`, `-`, `.`
NAME = re.compile(r"\w[\w.-]*")
#: files in experiments/ that are no experiment: hidden ones and editors' lock files (.#x.yml, ~$x.yml)
_IGNORED_PREFIXES = (".", "~")


@dataclass(frozen=True)
class Bilingual:
    """A text a reader sees: Chinese first, English beside."""

    zh: str
    en: str


@dataclass(frozen=True)
class Edit:
    """One anchor and the statement(s) that replace the statement it names."""

    anchor: Anchor
    replacement: tuple[str, ...]
    explicit_nth: bool = False  # `nth:` given: a repeated statement is then no ambiguity


@dataclass(frozen=True)
class Experiment:
    """One experiment file, validated."""

    name: str
    label: str  # root-relative file name, for messages: experiments/unfused.yml
    title: Bilingual
    hypothesis: Bilingual
    baseline: dict[str, Any]  # trace options of the baseline (subset of BASELINE_KEYS)
    edits: tuple[Edit, ...]

    @property
    def files(self) -> list[str]:
        """The vendored files the experiment edits, once each, in edit order."""
        return list(dict.fromkeys(e.anchor.path for e in self.edits))


@dataclass(frozen=True)
class AppliedEdit:
    """Where one edit landed: the baseline's line span and the edited file's."""

    edit: Edit
    old_span: tuple[int, int]
    new_span: tuple[int, int]

    def to_json(self) -> dict[str, Any]:
        a = self.edit.anchor
        return {"file": a.path, "symbol": a.symbol, "statement": normalise(a.statement or ""), "nth": a.nth,
                "replacement": [normalise(r) for r in self.edit.replacement],
                "old_span": list(self.old_span), "new_span": list(self.new_span)}


# ---------------------------------------------------------------- reading

def experiments_dir(root: Path) -> Path:
    return root / Project.EXPERIMENTS_DIR


def names(root: Path) -> list[str]:
    """The experiments of the project (file stems under experiments/), sorted; hidden files and editors'
    lock files are not experiments and are left out."""
    folder = experiments_dir(root)
    if not folder.is_dir():
        return []
    return sorted(p.name[: -len(EXPERIMENT_SUFFIX)] for p in folder.glob(f"*{EXPERIMENT_SUFFIX}")
                  if not p.name.startswith(_IGNORED_PREFIXES))


def load_experiment(root: Path, name: str) -> Experiment:
    """``experiments/<name>.yml``, validated; an unknown name lists the known ones. The file must be a
    regular file (a link's target is never read: its bytes would be echoed in messages) whose name can
    be a page and a command."""
    label = f"{Project.EXPERIMENTS_DIR}/{name}{EXPERIMENT_SUFFIX}"
    path = root / label
    if "/" in name or "\0" in name or name.startswith(_IGNORED_PREFIXES) or not (path.is_file() or path.is_symlink()):
        known = ", ".join(names(root)) or "none"
        raise UserError(f"experiment {name!r}: no {label}; known experiments: {known}")
    if path.is_symlink():
        raise UserError(f"{label}: is a symbolic link; an experiment must be a regular file "
                        "(replace the link with a copy of the file it points to)")
    if not NAME.fullmatch(name):
        raise UserError(f"{label}: the name {name!r} holds characters a page name or command cannot carry; "
                        "expected letters, digits, '_', '-' or '.'; rename the file (e.g. experiments/my-edit.yml)")
    return parse_experiment(codec.read_text(path, label), name, label)


def load_experiments(root: Path) -> list[Experiment]:
    return [load_experiment(root, n) for n in names(root)]


def experiment_anchors(root: Path) -> list[Anchor]:
    """Every edit's anchor (for `annotate check` and `vendor update`); none without experiments/."""
    return [e.anchor for x in load_experiments(root) for e in x.edits]


def parse_experiment(text: str, name: str, label: str) -> Experiment:
    """One experiment file's text -> Experiment; each problem is one line with file, entry and fix."""
    at = codec.At(label, fix=EXPERIMENT_FIX)
    data = codec.obj(parse_yaml(text, label), at)
    _refuse_unknown(data, _TOP_KEYS, at)
    edits = codec.field(data, "edits", at, codec.array)
    if not edits:
        raise UserError(f"{label}: $.edits: expected at least one edit, got none; {EXPERIMENT_FIX}")
    return Experiment(
        name=name, label=label,
        title=codec.field(data, "title", at, _title), hypothesis=codec.field(data, "hypothesis", at, _bilingual),
        baseline=codec.field(data, "baseline", at, _baseline, {}),
        edits=tuple(_edit(item, at.key("edits").index(i), f"{label}: edit {i + 1}") for i, item in enumerate(edits)))


def _refuse_unknown(data: dict[str, Any], allowed: tuple[str, ...], at: codec.At) -> None:
    unknown = sorted(k for k in data if k != "__line__" and k not in allowed)
    if unknown:
        at.key(unknown[0]).fail(f"one of the keys {', '.join(allowed)}", unknown[0])


def _bilingual(value: Any, at: codec.At) -> Bilingual:
    item = codec.obj(value, at)
    _refuse_unknown(item, ("zh", "en"), at)
    zh, en = (codec.field(item, k, at, _text) for k in ("zh", "en"))
    if not zh.strip() or not en.strip():
        at.fail("a non-empty zh and en", item)
    return Bilingual(zh.strip(), en.strip())


def _title(value: Any, at: codec.At) -> Bilingual:
    """A title is one line: its white space (line breaks included) collapses to single spaces."""
    text = _bilingual(value, at)
    return Bilingual(" ".join(text.zh.split()), " ".join(text.en.split()))


def _text(value: Any, at: codec.At) -> str:
    """A string a reader sees: printable text (YAML escapes can make control characters or lone surrogates,
    which no page can show and no UTF-8 file can hold); white space, line breaks included, is text."""
    text = codec.string(value, at)
    bad = next((c for c in text if not c.isspace() and unicodedata.category(c) in ("Cc", "Cs")), None)
    if bad is not None:
        at.fail("printable text (no control characters)", f"U+{ord(bad):04X} in {text[:40]!r}")
    return text


def _baseline(value: Any, at: codec.At) -> dict[str, Any]:
    item = codec.obj(value, at)
    _refuse_unknown(item, BASELINE_KEYS, at)
    out: dict[str, Any] = {}
    for key in ("preset", "dtype"):
        if key in item:
            out[key] = codec.string(item[key], at.key(key))
    for key in ("layers", "tokens", "seed"):
        if key in item:
            out[key] = codec.integer(item[key], at.key(key), 0 if key == "seed" else 1)
    return out


def _edit(value: Any, at: codec.At, origin: str) -> Edit:
    item = codec.obj(value, at)
    _refuse_unknown(item, _EDIT_KEYS, at)
    raw = codec.field(item, "replace", at, lambda v, a: v)
    replacement = [raw] if isinstance(raw, str) else codec.list_of(codec.string)(raw, at.key("replace"))
    if not replacement or not all(r.strip() for r in replacement):
        at.key("replace").fail("one or more non-empty statements", raw)
    anchor = Anchor(path=codec.field(item, "file", at, codec.string), symbol=codec.field(item, "symbol", at, codec.string),
                    statement=codec.field(item, "statement", at, codec.string),
                    nth=codec.field(item, "nth", at, lambda v, a: codec.integer(v, a, 0), 0), origin=origin)
    return Edit(anchor, tuple(r.rstrip("\n") for r in replacement), explicit_nth="nth" in item)


# ---------------------------------------------------------------- applying

def apply(experiment: Experiment, vendor: Path, scratch: Path) -> list[AppliedEdit]:
    """Copy the vendored package ``vendor`` to ``scratch`` (which must not exist) and apply every edit there.

    ``vendor`` is only read. Edits are resolved against the unedited files; the edited file must
    parse. Returns where each edit landed, in edit order."""
    texts = {path: codec.read_text(vendor / path, f"{vendor.name}/{path}", "run `annotate vendor sync`")
             if (vendor / path).is_file() else None for path in experiment.files}
    edited: dict[str, str] = {}
    landed: dict[Edit, AppliedEdit] = {}
    for path, text in texts.items():
        edits = [e for e in experiment.edits if e.anchor.path == path]
        new_text, spans = edit_text(text, path, edits)
        edited[path] = new_text
        landed.update(spans)
    shutil.copytree(vendor, scratch, ignore=shutil.ignore_patterns("__pycache__"), symlinks=True)
    for path, text in edited.items():
        (scratch / path).write_text(text, encoding="utf-8")
    return [landed[e] for e in experiment.edits]


def edit_text(text: str | None, path: str, edits: list[Edit]) -> tuple[str, dict[Edit, AppliedEdit]]:
    """``text`` (one vendored file; None: the file is gone) with ``edits`` applied; a bad edit raises one line."""
    model = parse(text, path) if text is not None else None
    spans = sorted(((_locate(e, model), e) for e in edits), key=lambda s: s[0])
    for (a, first), (b, second) in zip(spans, spans[1:]):
        if b[0] <= a[1]:
            raise UserError(f"{second.anchor.origin}: overlaps {first.anchor.origin} at line {b[0]} of {path}; "
                            "merge the two edits into one")
    assert text is not None  # _locate refused a missing file
    lines = text.splitlines(keepends=True)
    landed: dict[Edit, AppliedEdit] = {}
    shift = 0
    for (start, end), edit in spans:
        new = _indented(edit.replacement, lines[start - 1 + shift])
        lines[start - 1 + shift:end + shift] = new
        landed[edit] = AppliedEdit(edit, (start, end), (start + shift, start + shift + len(new) - 1))
        shift += len(new) - (end - start + 1)
    result = "".join(lines)
    bad = syntax_error_line(result)
    if bad is not None:
        culprit = next((e for e, a in landed.items() if a.new_span[0] <= bad <= a.new_span[1]), spans[-1][1])
        got = result.splitlines()[bad - 1].strip() if bad <= len(result.splitlines()) else ""
        raise UserError(f"{culprit.anchor.origin}: the edited {path} does not parse at line {bad} ({got!r}); "
                        "fix the replacement statement(s)")
    return result, landed


def _locate(edit: Edit, model: SourceFile | None) -> tuple[int, int]:
    """The line span the edit replaces: its anchor must resolve, once, to whole lines."""
    a = edit.anchor
    got = resolve(a, model)
    if not got.ok or got.span is None or model is None:
        raise UserError(f"{a.origin}: {a.label}: {got.describe()}; update the anchor to today's code")
    count = len(model.matches(a.symbol, a.statement or ""))
    if count > 1 and not edit.explicit_nth:
        raise UserError(f"{a.origin}: {a.label}: matches {count} statements; add `nth:` (0 for the first)")
    start, end = got.span
    whole = normalise("\n".join(model.lines[start - 1:end]))
    if whole != normalise(a.statement or ""):
        raise UserError(f"{a.origin}: {a.label}: shares its line(s) with other code; anchor a statement on lines of its own")
    return got.span


def _indented(replacement: tuple[str, ...], original: str) -> list[str]:
    """The replacement's lines, each indented like the replaced statement's first line."""
    indent = original[: len(original) - len(original.lstrip())]
    ending = "\r\n" if original.endswith("\r\n") else "\n"
    return [indent + line + ending if line.strip() else ending
            for statement in replacement for line in _dedent(statement)]


def _dedent(statement: str) -> list[str]:
    lines = statement.strip("\n").splitlines()
    margin = min((len(s) - len(s.lstrip()) for s in lines if s.strip()), default=0)
    return [s[margin:].rstrip() for s in lines]


# ---------------------------------------------------------------- line mapping

def baseline_line(applied: list[dict[str, Any]], file: str, line: int) -> int | None:
    """The baseline's line for ``line`` of the edited ``file`` (``applied``: a trace's edits as stored).

    Lines outside every edit shift by what the edits above them added; a line inside an edit maps to
    the replaced statement's first line; None when nothing maps it (never, for a well-formed list)."""
    shift = 0
    for item in sorted((a for a in applied if a["file"] == file), key=lambda a: a["new_span"][0]):
        (old_start, old_end), (new_start, new_end) = item["old_span"], item["new_span"]
        if line < new_start:
            break
        if line <= new_end:
            return int(old_start)
        shift += (new_end - new_start) - (old_end - old_start)
    return line - shift
