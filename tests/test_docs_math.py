"""A page's math as the build renders it (annotate.docs_math.render_page_math)."""
from __future__ import annotations

import pytest

from annotate.docs_math import render_page_math
from annotate.errors import UserError
from annotate.render.katex import MathError


def test_render_page_math_replaces_arithmatex_spans_and_names_the_page_on_bad_latex() -> None:
    page = '<p>a <span class="arithmatex">\\(x &lt; 1\\)</span> b</p><div class="arithmatex">\\[y\\]</div>'
    out = render_page_math(page, lambda tex, display: f"[{tex}|{display}]", "docs/lesson.md")
    assert out == "<p>a [x < 1|False] b</p>[y|True]"

    def refuse(tex: str, display: bool) -> str:
        raise MathError("Undefined control sequence")

    with pytest.raises(UserError, match=r"^docs/lesson.md: math \$x < 1\$: Undefined control sequence; fix the LaTeX$"):
        render_page_math(page, refuse, "docs/lesson.md")
