"""Python source -> one balanced HTML fragment per line, with Pygments' short token classes.

Material styles ``.highlight .k``, ``.highlight .n`` … through its own colour variables, so the
code follows the light/dark toggle; splitting tokens at newlines keeps every line's spans
closed, which lets a page put notes and values panels between any two lines.
"""
from __future__ import annotations

import html
import re

from pygments import lex
from pygments.lexers import PythonLexer
from pygments.token import STANDARD_TYPES, _TokenType


def _css_class(kind: _TokenType) -> str:
    """Pygments' short class for a token type, falling back to the nearest parent type."""
    while kind not in STANDARD_TYPES and kind.parent is not None:
        kind = kind.parent
    return STANDARD_TYPES.get(kind, "")


def highlight_lines(text: str) -> list[str]:
    """HTML per source line (1-based line n is item n-1); empty lines give ''."""
    lines: list[list[str]] = [[]]
    for kind, value in lex(text, PythonLexer(stripnl=False, ensurenl=False)):
        css = _css_class(kind)
        for i, piece in enumerate(value.split("\n")):
            if i:
                lines.append([])
            if piece:
                escaped = html.escape(piece, quote=False)
                lines[-1].append(f'<span class="{css}">{escaped}</span>' if css else escaped)
    count = len(text.splitlines())
    rendered = ["".join(parts) for parts in lines]
    return (rendered + [""] * count)[:count]


_WRAP = re.compile(r"(?<=[.(,])(?![^<]*>)")   # after . ( , in text, not inside a tag


def wrap_points(code_html: str) -> str:
    """``code_html`` with a ``<wbr>`` after every `.`, `(` and `,` of its text: where a narrow screen may
    wrap code (with the CSS's ``overflow-wrap: normal``) instead of inside an identifier."""
    return _WRAP.sub("<wbr>", code_html)
