"""Material's search index, refined after the build so that a hit lands where the reader needs it.

Material indexes a page by its headings: a source page is one 13,000 px section whose teaser is the
banner, the values panels' chrome ("加载中… loading…") and the whole file run together, and a note
lands on its card's heading. :func:`refine` rewrites the written index (``search/search_index.json``,
before Material's offline plugin copies it into a script):

- each class and function of a source page becomes an entry of its own, titled by its name and lines,
  whose text is its own code (a class without its methods' bodies), landing on its first line
  (``source/…/qwen3.py.html#L145``);
- each note lands on its line(s) (``#L154`` instead of ``#note-24``), titled with its file and lines;
- a source page's own entry keeps a short summary (file, size, symbols) instead of the page's text;
- layer superscripts are written as superscripts everywhere (``x₁⁽0⁾`` → ``x₁⁽⁰⁾``);
- entries get a ``boost`` by page (the lesson first), which Material's search worker passes to lunr.

Before indexing, :func:`spaced_cells` keeps table cells apart in the text Material reads from a page.

Only entries of pages listed in ``pages`` are touched besides the superscripts and boosts; the rest of
the index (config, other pages' sections) is kept as written. The facts come from the build's snapshot
(no HTML is parsed here).
"""
from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from annotate.atomic import atomic_write_text
from annotate.links import SOURCE_DIR, page_anchor
from annotate.pages.base.snapshot import Snapshot
from annotate.pages.base.tracefmt import sup_label

INDEX_PATH = "search/search_index.json"
#: page location prefix -> document boost (lunr multiplies a document's score by it); first match wins.
#: The lesson teaches the two-variable residual flow: for "residual" it should come before vLLM's files.
BOOSTS: tuple[tuple[str, float], ...] = (
    ("lesson.html", 4.0),
    ("diagrams.html", 2.0),
    ("map.html", 2.0),
    ("source/nanovllm/", 1.5),
    ("source/vllm/", 0.5),
)
_NOTE = re.compile(r"^note-(\d+)$")
_CELL_GAP = re.compile(r"(</t[dhr]>)(?=<t[dhr][\s>])")
_SPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class SymbolSpan:
    """A class or function of a source file: its qualified name, kind and local lines (1-based, inclusive)."""

    qualname: str
    kind: str
    start: int
    end: int


@dataclass(frozen=True)
class SourceEntries:
    """What the index needs of one source page: where it is, its lines, its symbols, its notes' lines."""

    path: str                                   # "nanovllm/models/qwen3.py"
    location: str                               # "source/nanovllm/models/qwen3.py.html"
    lines: tuple[str, ...]
    symbols: tuple[SymbolSpan, ...]
    notes: Mapping[int, tuple[int, int]] = field(default_factory=dict)   # note index -> (start, end)

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]


def lines_label(start: int, end: int) -> str:
    return f"{start}" if start == end else f"{start}–{end}"


def own_lines(sym: SymbolSpan, symbols: Sequence[SymbolSpan]) -> list[int]:
    """The lines of ``sym`` that no symbol nested in it covers (a class: its header and attributes)."""
    inner = [s for s in symbols if s is not sym and sym.start <= s.start and s.end <= sym.end and s != sym]
    return [n for n in range(sym.start, sym.end + 1) if not any(s.start <= n <= s.end for s in inner)]


def symbol_entry(page: SourceEntries, sym: SymbolSpan) -> dict[str, Any]:
    """One symbol as an entry: its name and lines as the title, its own code as the text."""
    code = "\n".join(page.lines[n - 1] for n in own_lines(sym, page.symbols) if 0 < n <= len(page.lines))
    code = _SPACE.sub(" ", code).strip()
    title = f"{sym.qualname} · {page.name}:{lines_label(sym.start, sym.end)}"
    return {"location": f"{page.location}#L{sym.start}", "title": html.escape(title),
            "text": f"<p>{html.escape(sym.kind)} · {html.escape(page.path)}</p><code>{html.escape(code)}</code>"}


def summary_text(page: SourceEntries) -> str:
    """A source page's own entry: the file, its size and its symbols (the lines are in the symbol entries)."""
    names = ", ".join(s.qualname for s in page.symbols)
    return (f"<p>{html.escape(page.path)} · {len(page.lines)} 行 lines · 符号 symbols: "
            f"<code>{html.escape(names)}</code></p>") if names else \
        f"<p>{html.escape(page.path)} · {len(page.lines)} 行 lines</p>"


def note_entry(page: SourceEntries, entry: dict[str, Any], index: int, taken: set[str]) -> dict[str, Any]:
    """A note's entry landing on its line(s); its title names the file (a note's heading names the lines).

    A location is the search engine's key: where another entry already lands on the same lines, the note
    keeps its card's anchor (``#note-N``, right under its line)."""
    span = page.notes.get(index)
    if span is None:
        return entry
    start, end = span
    title = re.sub(r"^L[0-9–-]+\s*", "", entry.get("title", ""))
    location = f"{page.location}{page_anchor(start, end)}"
    if location in taken:
        location = entry["location"]
    taken.add(location)
    return {**entry, "location": location,
            "title": f"{html.escape(page.name)}:{lines_label(start, end)} {title}".strip()}


def boost_for(location: str, boosts: Sequence[tuple[str, float]] = BOOSTS) -> float | None:
    return next((b for prefix, b in boosts if location.startswith(prefix)), None)


def refine(index: dict[str, Any], pages: Sequence[SourceEntries],
           boosts: Sequence[tuple[str, float]] = BOOSTS) -> dict[str, Any]:
    """The index with symbol entries, notes on their lines, source summaries, superscripts and boosts."""
    by_location = {p.location: p for p in pages}
    taken = {str(e.get("location", "")) for e in index.get("docs", [])}
    taken |= {f"{p.location}#L{s.start}" for p in pages for s in p.symbols}
    docs: list[dict[str, Any]] = []
    for entry in index.get("docs", []):
        page_loc, _, anchor = str(entry.get("location", "")).partition("#")
        page = by_location.get(page_loc)
        note = _NOTE.match(anchor)
        if page is not None and not anchor:
            entry = {**entry, "text": summary_text(page)}
            docs.append(entry)
            docs += [symbol_entry(page, s) for s in page.symbols]
            continue
        if page is not None and note:
            entry = note_entry(page, entry, int(note.group(1)), taken)
        docs.append(entry)
    out = []
    for entry in docs:
        entry = {**entry, "title": sup_label(str(entry.get("title", ""))), "text": sup_label(str(entry.get("text", "")))}
        boost = boost_for(str(entry["location"]), boosts)
        if boost is not None and "boost" not in entry:
            entry["boost"] = boost
        out.append(entry)
    return {**index, "docs": out}


def spaced_cells(page_html: str) -> str:
    """A space between adjacent table cells and rows (``</td><td>`` → ``</td> <td>``): the search index
    reads a page as text, where cells written edge to edge ran together ("cpucpu-bfloat16…"); in a table
    the space shows nothing."""
    return _CELL_GAP.sub(r"\1 ", page_html)


_SEARCH_ONLY = re.compile(r'<span class="an-tex-text" hidden>[^<]*</span>|<an-formula data-search-exclude>|</an-formula>')


def strip_search_only(page_html: str) -> str:
    """The written page without what only the search index reads (each formula's wrapper and Unicode text,
    :func:`annotate.pages.source.source_page.lean_math`): Material indexes a page before its template is rendered,
    so the reader's page stays as heavy as before."""
    if "an-formula" not in page_html:
        return page_html
    return _SEARCH_ONLY.sub("", page_html)


def refine_file(site_dir: Path, pages: Sequence[SourceEntries]) -> bool:
    """Rewrite ``site_dir/search/search_index.json`` in place (atomically); False when there is none."""
    path = site_dir / INDEX_PATH
    if not path.is_file():
        return False
    index = json.loads(path.read_text(encoding="utf-8"))
    atomic_write_text(path, json.dumps(refine(index, pages), ensure_ascii=False, separators=(",", ":")))
    return True


def source_entries(facts: Snapshot) -> list[SourceEntries]:
    """Every source page's symbols (as its symbols table lists them) and notes' lines, from the snapshot."""
    out = []
    for path in facts.page_paths():
        source = facts.source(path)
        if source is None:
            continue
        symbols = tuple(SymbolSpan(s.qualname, s.kind, *s.span)
                        for s in sorted(source.symbols.values(), key=lambda s: s.start_line))
        notes = {p.note.index: (p.start, p.end) for p in facts.placed.get(path, ())}
        out.append(SourceEntries(path, f"{SOURCE_DIR}/{path}.html", tuple(source.lines), symbols, notes))
    return out
