"""The facts of one build, computed once and frozen: what every generated page is rendered from.

:func:`build_snapshot` walks the vendor folders once, reads each vendored file once, parses each
Python file once (tree-sitter) and diffs each file against its upstream facts once; it then
resolves every note, every prose reference of the hand-written pages (given by MkDocs as
``src_uri -> Markdown``) and every anchor of the three-framework map against those parsed files,
and loads the traces (checked against the same bytes). Pages take these facts and pure functions of
them; nothing downstream reads the vendor tree again. The plugin keeps this one object between
its hooks.

The snapshot sits above vendoring, source, notes, references, the framework map and the trace
loader (:mod:`annotate.pages.base.trace_set`), and below the page renderers.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Mapping, Sequence

from annotate import references
from annotate.anchors import Anchor, Resolution, resolve
from annotate.framework_map import Row, load_map
from annotate.guard import recover_outputs
from annotate.links import FileFacts
from annotate.notes import CheckEntry, Note, NotesFile, load_all, resolve_notes
from annotate.pages.base.trace_set import TraceReview, TraceSet, load_traces, review_traces
from annotate.project import DOCS_FOLDER, Project
from annotate.references import Reference
from annotate.source import SourceFile, parse
from annotate.codec import read_bytes, utf8
from annotate.vendoring import linemap
from annotate.vendoring.lock import Lock
from annotate.vendoring.registry import NANO_VLLM, Registry, Vendor
from annotate.vendoring.status import status_of
from annotate.vendoring.sync import require_copy, verify_vendored, walk_vendor

if TYPE_CHECKING:
    from annotate.lesson.table import Table

Span = tuple[int, int]
_FIX = "run `annotate vendor sync` to restore it"


@dataclass(frozen=True)
class PlacedNote:
    """A resolved note and where it goes: after ``end`` (statement) or before ``start`` (symbol)."""

    note: Note
    start: int
    end: int

    @classmethod
    def of(cls, note: Note, resolution: Resolution) -> PlacedNote:
        start, end = resolution.span  # type: ignore[misc]
        return cls(note, start, end)

    @property
    def slot(self) -> tuple[int, str]:
        """(line, 'before'|'after'): where the card is drawn."""
        return (self.start, "before") if self.note.on_symbol else (self.end, "after")


@dataclass(frozen=True)
class Snapshot:
    """Everything the generated part of one build is made from (see the module docstring)."""

    root: Path
    files: Mapping[str, FileFacts]                 # every vendored file, the primary upstream's first
    sources: Mapping[str, SourceFile]              # path -> parsed file of `files` (those that parse), for
    #                                              resolve() callers: the dict the build resolved against
    pins: tuple[tuple[str, Lock], ...]             # every upstream's name and lock, the primary first
    notes: tuple[NotesFile, ...]
    placed: Mapping[str, tuple[PlacedNote, ...]]   # path -> its resolved notes, in notes-file order
    note_problems: tuple[str, ...]                 # one line per note that does not resolve
    references: Mapping[str, tuple[tuple[Reference, Resolution], ...]]  # page src uri -> (reference, resolution)
    #                                              in page order: a reference's place is (page, position)
    reference_problems: tuple[str, ...]
    map_rows: tuple[Row, ...] | None               # map/decoder-block.yml (None: the project has none)
    map_resolved: Mapping[Anchor, Resolution]      # every anchor of the map, resolved
    traces: TraceSet
    trace_review: TraceReview                      # fatal problems, warnings, notices about the traces
    recovered: tuple[str, ...]                     # what was put back from an interrupted trace swap
    ranges: Mapping[str, frozenset[Span]]          # path -> multi-line spans other pages link to

    @functools.cached_property
    def claims(self) -> Table:
        """The lesson's computed claims, loaded once per build on first use (only pages with ``{{= …}}``
        or ``{{diagram …}}`` need them; a cache miss runs the computation, see annotate.lesson.cache)."""
        from annotate.lesson.table import load_table

        return load_table(self.root)

    def source(self, path: str) -> SourceFile | None:
        """The parsed vendored Python file ``path`` (None when there is none)."""
        facts = self.files.get(path)
        return facts.source if facts else None

    def resolution(self, anchor: Anchor) -> Resolution:
        """A map anchor's stored resolution (any other anchor is resolved against the stored parse)."""
        found = self.map_resolved.get(anchor)
        return found if found is not None else resolve(anchor, self.source(anchor.path))

    def page_paths(self, only: Sequence[str] | None = None) -> list[str]:
        """The vendored Python files that get a page (``only`` limits them, e.g. for the benchmark)."""
        return [p for p in self.files if p.endswith(".py") and (only is None or p in only)]


def build_snapshot(root: Path, pages: Mapping[str, str] | None = None, strict: bool = False,
                   docs_label: str = DOCS_FOLDER) -> Snapshot:
    """The facts of one build of project ``root``; ``pages`` are the hand-written pages (src uri -> Markdown),
    ``docs_label`` their folder as messages name it (:attr:`annotate.project.Project.docs_label`).

    ``strict`` first checks that the bytes read are exactly what the locks vouch for (one line naming the
    first file that differs, is extra, missing or a link).
    A bad notes file, reference or trace file raises its one-line :class:`UserError`.
    """
    registry = Registry(root)
    files = {path: _file_facts(path, vendor.name, data, registry.lock(vendor))
             for vendor in registry.all for path, data in _read_copy(root, vendor, registry.lock(vendor), strict).items()}
    sources = {p: f.source for p, f in files.items() if f.source is not None}
    notes = tuple(load_all(root, known=set(files)))
    placed, note_problems = _place_notes(notes, sources)
    refs, ref_problems = _resolve_references(pages or {}, list(files), sources, docs_label)
    rows = load_map(root)
    map_resolved = {a: resolve(a, sources.get(a.path)) for row in rows or () for cell in row.cells.values()
                    for a in cell.anchors}
    # a trace, or an experiment's, that an interrupted swap moved aside (one being swapped now: wait, or refuse)
    recovered = tuple(line for folder in (Project.TRACES_DIR, Project.EXPERIMENT_TRACES_DIR)
                      for line in recover_outputs(root, root / folder))
    today = {p: f.data for p, f in files.items() if f.owner == NANO_VLLM.name}   # what traces are placed on
    traces = load_traces(root, registry.lock(registry.all[0]).upstream.commit, today=today)
    spans = [res for page in refs.values() for _, res in page] + list(map_resolved.values())
    return Snapshot(root=root, files=MappingProxyType(files), sources=MappingProxyType(sources),
                    pins=tuple((v.name, registry.lock(v)) for v in registry.all), notes=notes,
                    placed=MappingProxyType(placed), note_problems=note_problems, references=MappingProxyType(refs),
                    reference_problems=tuple(ref_problems), map_rows=None if rows is None else tuple(rows),
                    map_resolved=MappingProxyType(map_resolved), traces=traces,
                    trace_review=review_traces(traces, strict), recovered=recovered,
                    ranges=MappingProxyType(_ranges(spans)))


def _read_copy(root: Path, vendor: Vendor, lock: Lock, strict: bool) -> dict[str, bytes]:
    """The bytes of every file of one upstream's folder (one walk, one read each); a strict build first
    checks them against the lock: it publishes only what the lock vouches for."""
    walked = walk_vendor(root, vendor)
    data = {rel: read_bytes(root / vendor.dir / rel, rel, _FIX) for rel, is_link in walked if not is_link}
    if strict:
        verify_vendored(root, lock, vendor, walked, data)
    require_copy(root, vendor)
    return data


def _file_facts(path: str, owner: str, data: bytes, lock: Lock) -> FileFacts:
    """Parse and diff one vendored file, once."""
    source = parse(utf8(data, path, _FIX), path) if path.endswith(".py") else None
    lmap = linemap.build(path, data, lock.upstream)
    return FileFacts(path, owner, data, source, lmap, status_of(path, data, lock, lmap), lock)


def _place_notes(notes: Sequence[NotesFile], sources: Mapping[str, SourceFile]
                 ) -> tuple[dict[str, tuple[PlacedNote, ...]], tuple[str, ...]]:
    """Every note resolved: path -> the notes placed on its page, and one line per note that does not resolve."""
    placed: dict[str, list[PlacedNote]] = {}
    problems = []
    for note, resolution in resolve_notes(list(notes), sources):
        if resolution.ok:
            placed.setdefault(note.anchor.path, []).append(PlacedNote.of(note, resolution))
        else:
            problems.append(CheckEntry(resolution).line())
    return {p: tuple(n) for p, n in placed.items()}, tuple(problems)


def _resolve_references(pages: Mapping[str, str], vendored: list[str], sources: Mapping[str, SourceFile],
                        docs_label: str) -> tuple[dict[str, tuple[tuple[Reference, Resolution], ...]], list[str]]:
    """Every ``[[…]]`` of the hand-written pages, resolved (so problems fail the build early)."""
    found: dict[str, tuple[tuple[Reference, Resolution], ...]] = {}
    problems = []
    for uri, markdown in pages.items():
        pairs = []
        for ref in references.find_references(markdown, uri, vendored, docs_label):
            resolution = resolve(ref.anchor, sources.get(ref.anchor.path))
            pairs.append((ref, resolution))
            if not resolution.ok:
                problems.append(references.unresolved_message(ref, resolution))
        if pairs:
            found[uri] = tuple(pairs)
    return found, problems


def _ranges(resolutions: list[Resolution]) -> dict[str, frozenset[Span]]:
    """Path -> multi-line spans that links point at (the source pages give each an anchor id)."""
    out: dict[str, set[Span]] = {}
    for r in resolutions:
        if r.ok and r.span and r.span[1] > r.span[0]:
            out.setdefault(r.anchor.path, set()).add(r.span)
    return {path: frozenset(spans) for path, spans in out.items()}
