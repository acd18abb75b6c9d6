"""Put a trace's records on today's lines of the vendored files, and take statement text from them.

A trace holds no source text (it is data we may commit; the code is upstream's). It refers to each
statement by file and line, and carries the per-line hashes of every vendored file as it was when
the trace was recorded (`vendor.line_hashes`, format version 2). When the vendored file is the
same today, every record stays where it was. When it changed (another pin, a local edit), the two
hash lists are diffed by the vendoring line maps' own `match_lines` (difflib over per-line sha256
prefixes): a record whose lines all have a counterpart moves to today's lines; one
whose line is gone is kept as "recorded at <pin>, line N" and shown on no line.

Version-1 traces carry no line hashes: their records keep the recorded lines, and a file whose
bytes changed is withheld by the site as before (annotate/pages/base/trace_set.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from annotate.source import normalise
from annotate.vendoring.linemap import match_lines
from annotate.vendoring.lock import VENDOR_DIR, line_hashes


def statement_text(lines: Sequence[str], start: int, end: int) -> str:
    """The statement on lines start..end, normalised as the recorder keys it (`annotate.source.normalise`:
    comments dropped, white space collapsed, no padding in brackets)."""
    return normalise("\n".join(lines[start - 1:end]))


@dataclass
class FilePlacement:
    """How one vendored file's recorded lines land on today's lines."""

    file: str
    lines: list[str]                              # today's lines ([] when the file is gone)
    mapping: dict[int, int] | None                # None: the file is gone today
    moved: bool = False                           # some line number differs from the recording
    gone: set[int] = field(default_factory=set)   # recorded lines with no counterpart today
    keep_unmapped: bool = False                   # v1 (no line hashes): every record keeps its recorded lines

    def span(self, start: int, end: int) -> tuple[int, int] | None:
        """Today's span of recorded lines start..end, or None when any of them is gone."""
        if self.keep_unmapped:
            return start, end
        if self.mapping is None:
            self.gone.add(start)
            return None
        a, b = self.mapping.get(start), self.mapping.get(end)
        if a is None or b is None or b - a != end - start:
            self.gone.add(start)
            return None
        self.moved |= a != start
        return a, b

    def text(self, start: int, end: int) -> str:
        return statement_text(self.lines, start, end)


@dataclass
class Placement:
    """Placement of every recorded file of one trace on a project's vendored copy."""

    files: dict[str, FilePlacement]

    def file(self, name: str) -> FilePlacement:
        return self.files[name]

    def gone(self) -> dict[str, list[int]]:
        """Recorded lines (per file) that exist no more: shown as "recorded at <pin>", on no line."""
        return {f: sorted(p.gone) for f, p in sorted(self.files.items()) if p.gone}


def find_source_root(start: Path) -> Path | None:
    """The nearest folder at or above `start` holding the vendored copy (traces live in <root>/traces/*)."""
    for folder in (start, *start.parents):
        if (folder / VENDOR_DIR).is_dir():
            return folder
    return None


def plan(vendor: dict, files: Iterable[str], root: Path | None,
         today: Mapping[str, bytes] | None = None) -> Placement:
    """A Placement of `files` (as recorded) onto `<root>/vendor/nano-vllm` today.

    `vendor` is the trace's vendor block: `line_hashes` (v2) per file, or none (v1), in which case
    every record keeps its recorded lines (a changed file is the trace view's to withhold).
    `today` holds today's bytes of the vendored files when the caller has read them already (a
    build's snapshot): those files are not read again."""
    recorded_lines: dict = vendor.get("line_hashes") or {}
    out: dict[str, FilePlacement] = {}
    base = root / vendor.get("root", VENDOR_DIR) if root is not None else None
    for name in sorted(set(files)):
        path = base / name if base is not None else None
        data = today.get(name) if today is not None and path is not None else None
        if data is None:
            if path is None or not path.is_file():
                out[name] = FilePlacement(name, [], None)
                continue
            data = path.read_bytes()
        lines = data.decode("utf-8", errors="replace").splitlines()
        if name in recorded_lines:
            out[name] = FilePlacement(name, lines, match_lines(recorded_lines[name], line_hashes(data)))
        else:   # v1: lines kept as recorded; a changed file is the trace view's to withhold
            out[name] = FilePlacement(name, lines, {}, keep_unmapped=True)
    return Placement(out)

