"""Note prose -> HTML: Markdown (inline code, emphasis, links) plus ``$inline$`` math via KaTeX.

The rendering itself lives in :mod:`annotate.safe_html` (the one path that sanitises); this module
keeps the names the page generators import.
"""
from __future__ import annotations

from typing import Callable

from annotate.safe_html import split_math
from annotate.safe_html import prose as _prose

__all__ = ["render_prose", "split_math"]


def render_prose(text: str, math: Callable[[str], str]) -> str:
    """Markdown with inline math -> sanitised HTML; ``math(tex)`` returns KaTeX HTML (or raises)."""
    return _prose(text, math)
