"""Symbolic anchors into vendored files, and how each one resolves.

An anchor names code the way a reader would: a file, a symbol (``RMSNorm.add_rms_forward``) and
optionally a statement (normalised text) with ``nth`` when the text repeats. Notes and prose
references are both anchors. An anchor whose holder wrote no ``nth`` (``nth_set`` false) and whose
statement occurs more than once in its symbol is *ambiguous*: it is refused with the occurrences listed,
never bound to the first one silently. Resolution never trusts a line number; an optional ``line`` hint
(where the anchor was last seen) only lets the report say "moved 36 → 39".
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from annotate.source import AnchorError, SourceFile, normalise

EXACT, MOVED, CHANGED, VANISHED, AMBIGUOUS = "exact", "moved", "changed", "vanished", "ambiguous"
OK_STATES = (EXACT, MOVED)


@dataclass(frozen=True)
class Anchor:
    """Where an anchor points: ``path`` is vendor-relative (``nanovllm/layers/layernorm.py``)."""

    path: str
    symbol: str | None
    statement: str | None = None
    nth: int = 0
    line: int | None = None  # last known line: a hint for the report, never used to resolve
    origin: str = ""  # who holds the anchor, for messages: "notes/…/layernorm.py.yml: note 3"
    nth_set: bool = True  # False: the holder wrote no `nth`, so a repeated statement is ambiguous

    def target(self, quoted: bool = True) -> str:
        """`RMSNorm.forward › 'return x' (nth=1)`: the symbol and statement this anchor names."""
        what = self.symbol or "<module>"
        if self.statement is not None:
            text = normalise(self.statement)
            what += f" › {text!r}" if quoted else f" › {text}"
            what += f" (nth={self.nth})" if self.nth else ""
        return what

    @property
    def label(self) -> str:
        return f"{self.path}: {self.target()}"


def nearest_text(candidates: tuple[tuple[int, str], ...]) -> str:
    """`L36: return x; L38: …`: the nearest statements of a changed anchor, for a report line."""
    return "; ".join(f"L{line}: {text}" for line, text in candidates) or "none"


@dataclass(frozen=True)
class Resolution:
    """The outcome for one anchor against one version of a file."""

    anchor: Anchor
    state: str  # exact | moved | changed | vanished | ambiguous
    span: tuple[int, int] | None = None  # resolved local line span
    #: (line, text): the nearest statements when changed, every occurrence when ambiguous
    candidates: tuple[tuple[int, str], ...] = field(default=())

    @property
    def ok(self) -> bool:
        return self.state in OK_STATES

    def describe(self) -> str:
        a = self.anchor
        if self.state == EXACT:
            return f"exact at line {self.span[0]}" if self.span else "exact"
        if self.state == MOVED:
            return f"moved {a.line} → {self.span[0]}" if self.span else "moved"
        if self.state == CHANGED:
            return f"changed: statement not found in {a.symbol}; nearest: {nearest_text(self.candidates)}"
        if self.state == AMBIGUOUS:
            return occurrences_text(a, self.candidates)
        return f"vanished: symbol {a.symbol!r} is gone from {a.path}"


def occurrences_text(anchor: Anchor, occurrences: tuple[tuple[int, str], ...]) -> str:
    """`ambiguous: … occurs 2 times in X (lines 257, 273); add nth: 0–1`: the report of an ambiguous anchor."""
    lines = ", ".join(str(line) for line, _ in occurrences)
    return (f"ambiguous: the statement occurs {len(occurrences)} times in {anchor.symbol or 'module level'} "
            f"(lines {lines}); add `nth:` (0 = line {occurrences[0][0]} … {len(occurrences) - 1} = line "
            f"{occurrences[-1][0]}) to say which")


def resolve(anchor: Anchor, source: SourceFile | None, k: int = 3) -> Resolution:
    """Resolve ``anchor`` in ``source`` (None: the file itself is gone)."""
    if source is None or (anchor.symbol is not None and anchor.symbol not in source.symbols):
        return Resolution(anchor, VANISHED)
    if anchor.statement is not None and not anchor.nth_set:
        found = source.matches(anchor.symbol, anchor.statement)
        if len(found) > 1:
            return Resolution(anchor, AMBIGUOUS, candidates=tuple((s.start_line, s.text) for s in found))
    try:
        span = source.find(anchor.symbol, anchor.statement, anchor.nth)
    except AnchorError:
        near = source.nearest(anchor.symbol, anchor.statement or "", k)
        return Resolution(anchor, CHANGED, candidates=tuple((s.start_line, s.text) for s in near))
    state = MOVED if anchor.line is not None and anchor.line != span[0] else EXACT
    return Resolution(anchor, state, span=span)


def compare(anchor: Anchor, old: SourceFile | None, new: SourceFile | None) -> Resolution:
    """Resolve across a vendor update: the old line (from the old file) is the hint for "moved"."""
    before = resolve(anchor, old) if old is not None else None
    hint = before.span[0] if before is not None and before.span else anchor.line
    return resolve(replace(anchor, line=hint), new)
