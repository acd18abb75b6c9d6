"""Note prose -> HTML: Markdown (inline code, emphasis, links) plus ``$inline$`` math via KaTeX."""
from __future__ import annotations

import re
from typing import Callable

import markdown

_INLINE_MATH = re.compile(r"(?<![\\$])\$(?!\s)(.+?)(?<![\s\\])\$(?!\$)")
_TOKEN = "zzanmath{}zz"  # letters only: Markdown leaves it alone (it uses \x02…\x03 itself)


def split_math(text: str) -> tuple[str, list[str]]:
    """Replace each ``$…$`` by a placeholder Markdown leaves alone; return the formulas."""
    found: list[str] = []

    def keep(m: re.Match) -> str:
        found.append(m.group(1))
        return _TOKEN.format(len(found) - 1)

    return _INLINE_MATH.sub(keep, text), found


def render_prose(text: str, math: Callable[[str], str]) -> str:
    """Markdown with inline math -> HTML; ``math(tex)`` returns KaTeX HTML (or raises)."""
    stripped, formulas = split_math(text)
    body = markdown.markdown(stripped, output_format="html")
    for i, tex in enumerate(formulas):
        body = body.replace(_TOKEN.format(i), math(tex))
    return body
