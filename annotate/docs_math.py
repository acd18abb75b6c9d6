"""Math on the hand-written pages: where it is, and the check `annotate check` shares with the strict build.

pymdownx.arithmatex (generic mode, configured in mkdocs.yml) wraps each ``$…$`` / ``$$…$$`` of a page
in ``<span|div class="arithmatex">``; the plugin renders those with KaTeX at build time
(:func:`render_page_math`). So that
`annotate check` gives the strict build's verdict, it converts each page with the same Markdown
extensions and asks KaTeX about the same formulas.
"""
from __future__ import annotations

import html
import re
from typing import Callable, Iterator

from annotate.errors import UserError
from annotate.project import Project
from annotate.render.katex import MathError

ARITHMATEX = re.compile(r'<(span|div) class="arithmatex">\s*\\[(\[]\s*(.*?)\s*\\[)\]]\s*</\1>', re.S)


def page_formulas(page_html: str) -> Iterator[tuple[str, bool]]:
    """(LaTeX, display) of every arithmatex span in a page's HTML."""
    for m in ARITHMATEX.finditer(page_html):
        yield html.unescape(m.group(2)), m.group(1) == "div"


def render_page_math(page_html: str, math: Callable[[str, bool], str], where: str) -> str:
    """A page's HTML with every arithmatex span replaced by ``math(tex, display)`` (KaTeX at build time);
    LaTeX KaTeX refuses is one :class:`UserError` line naming ``where`` (the page) and the formula."""
    def one(m: re.Match[str]) -> str:
        tex = html.unescape(m.group(2))
        try:
            return math(tex, m.group(1) == "div")
        except MathError as exc:
            raise UserError(f"{where}: math ${tex}$: {exc}; fix the LaTeX") from None

    return ARITHMATEX.sub(one, page_html)


def check_docs(project: Project, math_check: Callable[[str], str | None]) -> list[str]:
    """One line per formula on a hand-written page (as the build lists them) that KaTeX refuses (empty: all parse)."""
    import markdown

    from annotate.codec import read_text

    config = project.mkdocs_config
    # one converter for all pages, reset between them (Python-Markdown's way to reuse one instance)
    md = markdown.Markdown(extensions=config["markdown_extensions"], extension_configs=config["mdx_configs"])
    problems = []
    for page in project.pages():
        rel = f"{project.docs_label}/{page.uri}"
        for tex, _display in page_formulas(md.reset().convert(read_text(page.path, rel))):
            if problem := math_check(tex):
                problems.append(f"{rel}: math ${tex}$: {problem}; fix the LaTeX")
    return problems
