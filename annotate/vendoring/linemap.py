"""Local line <-> upstream line, found by diffing per-line hashes.

Every permalink is built on this map: a local line with an upstream counterpart links to that
upstream line at the pinned commit; a local-only line gets no permalink, and the page says so.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Sequence

from annotate.vendoring.lock import Upstream, blob_id, line_hashes


@dataclass(frozen=True)
class LineMap:
    """The mapping for one file. Lines are 1-based on both sides."""

    path: str
    local_to_upstream: dict[int, int]
    local_lines: int
    upstream_lines: int
    identical: bool  # git blob ids equal: the file is upstream's, byte for byte

    def upstream_line(self, local: int) -> int | None:
        return self.local_to_upstream.get(local)

    def upstream_span(self, start: int, end: int) -> tuple[int, int] | None:
        """The upstream span for local lines start..end, or None if any of them is local-only."""
        mapped = [self.local_to_upstream.get(n) for n in range(start, end + 1)]
        found = [m for m in mapped if m is not None]
        if len(found) < len(mapped):
            return None
        return (min(found), max(found))

    def local_only(self) -> list[tuple[int, int]]:
        """Ranges of local lines with no upstream counterpart, e.g. [(204, 217)]."""
        return ranges(n for n in range(1, self.local_lines + 1) if n not in self.local_to_upstream)


def match_lines(before: Sequence[str], after: Sequence[str]) -> dict[int, int]:
    """1-based line of `before` -> line of `after`, for the lines whose hash has an unchanged
    counterpart (difflib's longest matching blocks over the two lists of per-line hashes)."""
    if list(before) == list(after):
        return {n: n for n in range(1, len(after) + 1)}
    matcher = difflib.SequenceMatcher(None, list(before), list(after), autojunk=False)
    mapping: dict[int, int] = {}
    for a, b, size in matcher.get_matching_blocks():
        for k in range(size):
            mapping[a + k + 1] = b + k + 1
    return mapping


def build(path: str, local: bytes, upstream: Upstream) -> LineMap:
    """Map ``local`` (the vendored file's bytes) onto the upstream facts for ``path``."""
    mine = line_hashes(local)
    facts = upstream.files.get(path)
    theirs: Sequence[str] = facts.line_hashes if facts else ()
    mapping = match_lines(mine, theirs)
    return LineMap(path=path, local_to_upstream=mapping, local_lines=len(mine),
                   upstream_lines=len(theirs), identical=facts is not None and blob_id(local) == facts.blob)


def ranges(numbers) -> list[tuple[int, int]]:
    """Collapse increasing integers into inclusive (start, end) runs."""
    runs: list[tuple[int, int]] = []
    for n in numbers:
        if runs and runs[-1][1] == n - 1:
            runs[-1] = (runs[-1][0], n)
        else:
            runs.append((n, n))
    return runs


def format_ranges(runs: list[tuple[int, int]]) -> str:
    return ", ".join(f"{a}" if a == b else f"{a}–{b}" for a, b in runs)
