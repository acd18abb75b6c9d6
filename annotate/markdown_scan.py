"""Finding our own markup (``[[…]]`` references, ``{{= …}}`` claims) in Markdown prose only.

Both must skip fenced code blocks and inline code spans, so that a page can *show* the syntax
without it being resolved; this is the one place that knows how.
"""
from __future__ import annotations

import re
from typing import Iterator

_FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
_CODE_SPAN = re.compile(r"(`+)(?:.+?)\1")


def mask_code_spans(text: str, fill: str = "\0") -> str:
    """``text`` with every inline code span replaced by ``fill`` characters (same length)."""
    return _CODE_SPAN.sub(lambda c: fill * len(c.group(0)), text)


def prose_lines(markdown: str, fill: str = "\0") -> Iterator[tuple[int, str]]:
    """(1-based line number, text with inline code masked) for the lines outside fenced code."""
    fence = None
    # split on "\n" only: the substituting callers index lines the same way, and splitlines() would
    # also break at U+2028, form feeds or a lone "\r", shifting every later line number
    for number, text in enumerate(markdown.split("\n"), start=1):
        opening = _FENCE.match(text)
        if fence is None and opening:
            fence = opening.group(1)
            continue
        if fence is not None:
            stripped = text.strip()
            if stripped.startswith(fence) and set(stripped) == {fence[0]}:
                fence = None
            continue
        yield number, mask_code_spans(text, fill)


def replace_outside_code(text: str, raw: str, new: str) -> str:
    """Replace the first occurrence of ``raw`` in ``text`` that is not inside a code span."""
    at = mask_code_spans(text).find(raw)
    return text if at < 0 else text[:at] + new + text[at + len(raw):]
