"""The whole generated part of the site, independent of MkDocs: source pages + index + problems.

The plugin calls :func:`generate` from ``on_files`` with the build's snapshot
(:func:`annotate.pages.base.snapshot.build_snapshot`); the benchmark and the tests call it directly.
Notes that do not resolve (changed / vanished) are left off the page and listed in ``problems``;
the caller decides whether that fails the build (strict) or only warns.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

from annotate.errors import UserError
from annotate.links import page_src_uri
from annotate.notes import NotesFile, vet_math
from annotate.pages.base.extras import LineExtras
from annotate.pages.source.index import INDEX_URI, render_index
from annotate.safe_html import inline_math
from annotate.pages.base.snapshot import Snapshot
from annotate.pages.source.source_page import MathFn, PageInput, render_page
from annotate.render.katex import MathError


@dataclass
class Generated:
    """Generated pages (docs-relative path -> Markdown), other files, and the notes that did not resolve."""

    pages: dict[str, str] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)   # other generated files (e.g. the values scripts)
    problems: list[str] = field(default_factory=list)


def generate(snapshot: Snapshot, math: MathFn, math_check, extras: Sequence[LineExtras] = (),
             only: Sequence[str] | None = None,
             prefetch: Callable[[list[tuple[str, bool]]], None] | None = None) -> Generated:
    """Vet the notes' math and render every source page and the index from the build's facts.

    The snapshot's referenced ranges (path -> line ranges that prose and the map link to) become real
    anchors on the pages, so MkDocs' link validation knows ``#L28-L40`` exists. ``prefetch`` (e.g.
    ``Katex.prefetch``) renders every formula of the notes in one round trip before the pages ask for
    them one by one.
    """
    files = list(snapshot.notes)
    if prefetch is not None:
        prefetch(note_formulas(files))
    vet_math(files, math_check)
    by_path = {f.path: f for f in files}
    result = Generated(problems=list(snapshot.note_problems))
    paths = snapshot.page_paths(only)
    for path in paths:
        notes_file = by_path.get(path)
        page = PageInput(snapshot.files[path], snapshot.placed.get(path, ()), _guard(math, notes_file),
                         notes_file.intro if notes_file else {}, extras, sorted(snapshot.ranges.get(path, ())))
        result.pages[page_src_uri(path)] = render_page(page)
        for extra in extras:   # a provider may ship data beside the page, loaded only when needed
            result.files.update(extra.data_files(path))
    if only is None:
        counts = {p: len(snapshot.placed.get(p, ())) for p in paths}
        result.pages[INDEX_URI] = render_index(paths, counts, snapshot.files)
    return result


def note_formulas(files: list[NotesFile]) -> list[tuple[str, bool]]:
    """Every (LaTeX, display) the notes will ask for: math, vars (checked as display, shown inline), prose."""
    found: list[tuple[str, bool]] = []
    for f in files:
        texts = list(f.intro.values())
        for note in f.notes:
            found += [(note.math, True)] if note.math else []
            found += [(v, d) for v in note.vars.values() for d in (True, False)]
            texts += [note.zh, note.en]
        found += [(tex, False) for text in texts for tex in inline_math(text)]
    return found


def _guard(math: MathFn, notes_file: NotesFile | None) -> MathFn:
    """Turn a KaTeX failure inside prose into one line naming the notes file."""
    where = notes_file.notes_path if notes_file else "page"

    def render(tex: str, display: bool) -> str:
        try:
            return math(tex, display)
        except MathError as exc:
            raise UserError(f"{where}: inline math ${tex}$: {exc}; fix the LaTeX") from None

    return render
