"""Notes files -> anchored notes; resolution against the vendored code; the drift report.

One YAML file per annotated vendored file: ``notes/<vendor path>.yml`` (for example
``notes/nanovllm/layers/layernorm.py.yml``)::

    intro:                       # optional: a paragraph shown above the code
      zh: …
      en: …
    notes:
      - symbol: RMSNorm.add_rms_forward           # qualified name (required)
        statement: residual = x.to(orig_dtype)    # optional: without it the note is on the symbol
        nth: 0                                    # optional: which repeat of the same text (0-based)
        math: r \\leftarrow \\mathrm{bf16}(x + r)   # optional LaTeX (KaTeX), shown as display math
        vars: {residual: x_1}                     # optional: code variable -> math it holds afterwards
        zh: 中文说明（可用 Markdown 与 $行内公式$）
        en: English text (Markdown and $inline math$ allowed)

A note is anchored by symbol + normalised statement (+ nth), never by a line number, so it
survives upstream edits; :func:`check` reports per note exact / moved / changed / vanished via
:mod:`annotate.anchors`. Prose references in ``docs/`` are anchors too (see
:mod:`annotate.references`); :func:`annotate.project_anchors.all_anchors` and
:func:`annotate.project_anchors.check` cover both (with the map's and the experiments').
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import yaml

from annotate.anchors import Anchor, Resolution, resolve
from annotate.codec import read_text
from annotate.errors import UserError
from annotate.project import Project
from annotate.safe_html import inline_math
from annotate.source import SourceFile, load, normalise
from annotate.vendoring.registry import Registry, vendors
from annotate.vendoring.sync import vendored_files

SUFFIX = ".yml"
NOTE_KEYS = ("symbol", "statement", "nth", "math", "vars", "zh", "en")
FILE_KEYS = ("intro", "notes")
TEXT_KEYS = ("zh", "en")


@dataclass(frozen=True)
class Note:
    """One note: its anchor (symbol, statement, nth), its math and its prose."""

    anchor: Anchor
    index: int  # 1-based position in its file, for messages ("note 4")
    yaml_line: int  # line of the note in the YAML file, for messages
    math: str = ""
    zh: str = ""
    en: str = ""
    vars: dict[str, str] = field(default_factory=dict)

    @property
    def on_symbol(self) -> bool:
        """True when the note describes the symbol as a whole (no statement)."""
        return self.anchor.statement is None


@dataclass(frozen=True)
class NotesFile:
    """The notes of one vendored file, in file order."""

    path: str  # vendor-relative path of the annotated file
    notes_path: str  # project-relative path of the YAML file
    notes: tuple[Note, ...]
    intro: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class CheckEntry:
    """One anchor's resolution, with who holds it (a note or a prose reference)."""

    resolution: Resolution

    @property
    def ok(self) -> bool:
        return self.resolution.ok

    def line(self) -> str:
        """One report line: holder, anchor, state."""
        r = self.resolution
        return f"{r.anchor.origin}: {r.anchor.path} › {r.anchor.target(quoted=False)}: {r.describe()}"


@dataclass(frozen=True)
class CheckReport:
    """Resolution of every note and prose reference; ``ok`` is false on changed/vanished."""

    entries: tuple[CheckEntry, ...]

    @property
    def ok(self) -> bool:
        return all(e.ok for e in self.entries)

    @property
    def problems(self) -> tuple[CheckEntry, ...]:
        return tuple(e for e in self.entries if not e.ok)

    def counts(self) -> dict[str, int]:
        found: dict[str, int] = {}
        for e in self.entries:
            found[e.resolution.state] = found.get(e.resolution.state, 0) + 1
        return found

    def render(self) -> str:
        """The printed report: one line per entry, then a summary line."""
        lines = [e.line() for e in self.entries]
        summary = ", ".join(f"{n} {state}" for state, n in sorted(self.counts().items()))
        lines.append(f"{len(self.entries)} anchors: {summary or 'none'}")
        return "\n".join(lines)


# --- loading --------------------------------------------------------------------------------


class _LineLoader(yaml.SafeLoader):
    """SafeLoader that remembers each mapping's line and refuses duplicate keys."""


def _construct_mapping(loader: _LineLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        if key in seen:
            mark = key_node.start_mark
            raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", mark)
        seen.add(key)
    mapping = yaml.SafeLoader.construct_mapping(loader, node, deep=True)
    mapping["__line__"] = node.start_mark.line + 1
    return mapping


_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def vendored_path_for(notes_file: Path, root: Path) -> str:
    """The vendored path a notes file annotates (its path under notes/ without ``.yml``)."""
    rel = notes_file.relative_to(root / Project.NOTES_DIR).as_posix()
    return rel[: -len(SUFFIX)]


def parse_yaml(text: str, where: str) -> Any:
    """YAML -> data; a syntax error becomes one line ``file:line:col: problem``."""
    try:
        return yaml.load(text, Loader=_LineLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        pos = f"{where}:{mark.line + 1}:{mark.column + 1}" if mark else where
        problem = " ".join(p for p in (exc.context, exc.problem) if p)
        raise UserError(f"{pos}: malformed YAML: {problem}; fix the syntax") from None
    except yaml.reader.ReaderError as exc:   # a control character: PyYAML's message spans two lines
        line = text.count("\n", 0, exc.position) + 1
        char = exc.character if isinstance(exc.character, str) else chr(exc.character)
        raise UserError(f"{where}:{line}: malformed YAML: character U+{ord(char):04X} is not allowed in YAML; "
                        "remove it") from None
    except yaml.YAMLError as exc:
        raise UserError(f"{where}: malformed YAML: {' '.join(str(exc).split())}; fix the syntax") from None


def parse_notes(text: str, path: str, notes_path: str) -> NotesFile:
    """Parse one notes file's text; every problem is one UserError line naming file and note."""
    data = parse_yaml(text, notes_path)
    if data is None:
        return NotesFile(path, notes_path, ())
    if not isinstance(data, dict):
        raise UserError(f"{notes_path}: the top level must be a mapping with a `notes:` list")
    _refuse_unknown(data, FILE_KEYS, f"{notes_path}:{data['__line__']}", "top level")
    raw = data.get("notes") or []
    if not isinstance(raw, list):
        raise UserError(f"{notes_path}: `notes:` must be a list of notes (each starting with `- symbol:`)")
    intro = _texts(data.get("intro") or {}, f"{notes_path}: intro")
    notes = tuple(_note(item, i, path, notes_path) for i, item in enumerate(raw, start=1))
    _refuse_duplicates(notes, notes_path)
    return NotesFile(path, notes_path, notes, intro)


def _note(item: Any, index: int, path: str, notes_path: str) -> Note:
    """One YAML mapping -> Note, with the checks a person needs to fix it quickly."""
    if not isinstance(item, dict):
        raise UserError(f"{notes_path}: note {index} must be a mapping (symbol, statement, math, zh, en)")
    where = f"{notes_path}:{item['__line__']}: note {index}"
    _refuse_unknown(item, NOTE_KEYS, where, "note")
    symbol = item.get("symbol")
    if not isinstance(symbol, str) or not symbol.strip():
        raise UserError(f"{where}: `symbol:` is required (a qualified name such as RMSNorm.forward)")
    statement = item.get("statement")
    if statement is not None and (not isinstance(statement, str) or not normalise(statement)):
        raise UserError(f"{where}: `statement:` must be the statement's text (omit it for a note on the symbol)")
    nth = item.get("nth", 0)
    if not isinstance(nth, int) or isinstance(nth, bool) or nth < 0:
        raise UserError(f"{where}: `nth:` must be a whole number >= 0 (which repeat of the statement, 0 = first)")
    if statement is None and nth:
        raise UserError(f"{where}: `nth:` needs a `statement:`")
    texts = _texts({k: item[k] for k in TEXT_KEYS if k in item}, where)
    math = item.get("math", "")
    if not isinstance(math, str):
        raise UserError(f"{where}: `math:` must be a LaTeX string (quote it)")
    variables = item.get("vars") or {}
    if not isinstance(variables, dict) or not all(isinstance(v, str) for k, v in variables.items() if k != "__line__"):
        raise UserError(f"{where}: `vars:` must map code variables to LaTeX strings, e.g. {{residual: x_1}}")
    variables = {str(k): v for k, v in variables.items() if k != "__line__"}
    if not texts.get("zh") and not texts.get("en") and not math:
        raise UserError(f"{where}: the note is empty; give it `zh:`/`en:` prose or `math:`")
    anchor = Anchor(path=path, symbol=symbol.strip(), statement=statement, nth=nth,
                    origin=f"{notes_path}: note {index}", nth_set="nth" in item)
    return Note(anchor=anchor, index=index, yaml_line=item["__line__"], math=math.strip(),
                zh=texts.get("zh", ""), en=texts.get("en", ""), vars=variables)


def _texts(data: Any, where: str) -> dict[str, str]:
    if not isinstance(data, dict):
        raise UserError(f"{where}: expected a mapping with `zh:` and/or `en:` text")
    _refuse_unknown(data, TEXT_KEYS, where, "text")
    out = {}
    for key in TEXT_KEYS:
        if key in data:
            if not isinstance(data[key], str):
                raise UserError(f"{where}: `{key}:` must be text")
            out[key] = data[key].strip()
    return out


def _refuse_unknown(data: dict, allowed: tuple[str, ...], where: str, what: str) -> None:
    unknown = sorted(str(k) for k in data if k != "__line__" and k not in allowed)
    if unknown:
        raise UserError(f"{where}: unknown key {unknown[0]!r} in {what}; allowed keys: {', '.join(allowed)}")


def _refuse_duplicates(notes: tuple[Note, ...], notes_path: str) -> None:
    """Two notes on the same (symbol, statement, nth) would both claim one line: refuse."""
    first: dict[tuple, Note] = {}
    for note in notes:
        a = note.anchor
        key = (a.symbol, normalise(a.statement) if a.statement is not None else None, a.nth)
        if key in first:
            raise UserError(
                f"{notes_path}:{note.yaml_line}: note {note.index} duplicates note {first[key].index} "
                f"(same symbol, statement and nth); merge them or set `nth:`")
        first[key] = note


def load_file(root: Path, notes_file: Path, known: set[str] | None = None) -> NotesFile:
    """Load one notes file; refuse it if the file it annotates is not in the vendor."""
    path = vendored_path_for(notes_file, root)
    notes_path = notes_file.relative_to(root).as_posix()
    known = set(vendored_files(root)) if known is None else known
    if path not in known:
        link = next((f"{v.dir}/{path}" for v in vendors(root) if (root / v.dir / path).is_symlink()), None)
        if link is not None:   # the notes file is right: the vendored file is what is wrong
            raise UserError(f"{link}: is a symbolic link, not a vendored file (annotated by {notes_path}); "
                            "run `annotate vendor sync` to restore the vendored copy the lock pins")
        raise UserError(f"{notes_path}: {path} is not a vendored file (see `annotate vendor status`); "
                        f"rename the notes file to notes/<vendored path>.yml or delete it")
    return parse_notes(read_text(notes_file, notes_path), path, notes_path)


def load_all(root: Path, known: set[str] | None = None) -> list[NotesFile]:
    """Every notes file under ``notes/``, parsed and checked (not yet resolved), in path order.

    ``known`` (the vendored paths, when the caller has them) saves a walk of the vendor tree."""
    folder = root / Project.NOTES_DIR
    if not folder.is_dir():
        return []
    known = set(vendored_files(root)) if known is None else known
    return [load_file(root, f, known) for f in sorted(folder.rglob(f"*{SUFFIX}"))]


# --- resolution -----------------------------------------------------------------------------


@dataclass
class Sources:
    """Parsed vendored files, loaded once each (None for a file that is not there)."""

    root: Path
    cache: dict[str, SourceFile | None] = field(default_factory=dict)
    registry: Registry | None = None  # which upstream's folder holds a path (read on first use)

    def get(self, path: str) -> SourceFile | None:
        if path not in self.cache:
            if self.registry is None:
                self.registry = Registry(self.root)
            file = self.registry.file(path)
            self.cache[path] = load(file, path) if file.is_file() else None
        return self.cache[path]


def resolve_notes(files: list[NotesFile], sources: Sources | Mapping[str, SourceFile]) -> list[tuple[Note, Resolution]]:
    """Every note with its resolution against the vendored code."""
    return [(note, resolve(note.anchor, sources.get(f.path))) for f in files for note in f.notes]


def note_anchors(files: list[NotesFile]) -> list[Anchor]:
    return [note.anchor for f in files for note in f.notes]


def vet_math(files: list[NotesFile], math_check: Callable[[str], str | None]) -> None:
    """Refuse the first formula KaTeX cannot parse: file, note and KaTeX's own message."""
    for f in files:
        for key, text in f.intro.items():
            for tex in inline_math(text):
                if problem := math_check(tex):
                    raise UserError(f"{f.notes_path}: intro `{key}`: ${tex}$: {problem}; fix the LaTeX")
        for note in f.notes:
            prose = [(key, tex) for key in ("zh", "en") for tex in inline_math(getattr(note, key))]
            for key, tex in [("math", note.math), *((f"vars.{k}", v) for k, v in note.vars.items()), *prose]:
                if tex and (problem := math_check(tex)):
                    raise UserError(f"{f.notes_path}:{note.yaml_line}: note {note.index} `{key}`: {problem}; "
                                    f"fix the LaTeX")
