"""The one way text from notes, docs, the lock or a trace becomes page HTML: sanitised.

Note prose (``zh``/``en``), page intros and the hand-written pages under ``docs/`` are Markdown
that may carry raw HTML. Everything they produce passes :func:`clean` (the ``nh3`` sanitiser, a
binding of the Ammonia crate): an allow-list of tags and attributes, no ``<script>``/``<style>``
(their content is dropped), no ``on*`` event handler, and URLs only ``http``, ``https``,
``mailto`` or relative, so no ``javascript:`` or ``data:`` link can reach a page. KaTeX's output
is added after cleaning, from formulas rendered with ``trust: false`` (no ``\\href`` or HTML).
"""
from __future__ import annotations

import re
from typing import Callable

import markdown
import nh3

#: what a hand-written page or a note may use: nh3's defaults plus the forms and sections of our pages
TAGS = frozenset(nh3.ALLOWED_TAGS | {"fieldset", "legend", "label", "input", "button", "section", "output",
                                     "span", "div", "details", "summary", "figure", "figcaption", "main"})
GENERIC = frozenset({"class", "id", "title", "lang", "dir", "role", "hidden", "name", "value", "type", "checked",
                     "disabled", "for", "tabindex", "open", "colspan", "rowspan", "align", "style"})
ATTRIBUTES = {"*": set(GENERIC), "a": {"href", "hreflang"}, "img": {"src", "alt", "width", "height"},
              "ol": {"start"}, "th": {"scope"}}
URL_SCHEMES = frozenset({"http", "https", "mailto"})
STYLE = frozenset({"text-align"})  # Markdown tables align their cells with it

_CLEANER = nh3.Cleaner(tags=set(TAGS), clean_content_tags={"script", "style"}, attributes=ATTRIBUTES,
                       generic_attribute_prefixes={"data-", "aria-"}, url_schemes=set(URL_SCHEMES),
                       link_rel=None, strip_comments=True, filter_style_properties=set(STYLE))

_INLINE_MATH = re.compile(r"(?<![\\$])\$(?!\s)(.+?)(?<![\s\\])\$(?!\$)")
_TOKEN = "zzanmath{}zz"  # letters only: Markdown and the sanitiser leave it alone


def clean(html: str) -> str:
    """``html`` with every tag, attribute and URL outside the allow-list removed."""
    return _CLEANER.clean(html)


def split_math(text: str) -> tuple[str, list[str]]:
    """Replace each ``$…$`` by a placeholder Markdown leaves alone; return the formulas."""
    found: list[str] = []

    def keep(m: re.Match) -> str:
        found.append(m.group(1))
        return _TOKEN.format(len(found) - 1)

    return _INLINE_MATH.sub(keep, text), found


def inline_math(text: str) -> list[str]:
    """The ``$…$`` formulas of a prose text (for `annotate check` and the strict build's math vetting)."""
    return split_math(text)[1]


def prose(text: str, math: Callable[[str], str]) -> str:
    """Markdown with inline math -> sanitised HTML; ``math(tex)`` returns KaTeX HTML (or raises)."""
    stripped, formulas = split_math(text)
    body = clean(markdown.markdown(stripped, output_format="html"))
    for i, tex in enumerate(formulas):
        body = body.replace(_TOKEN.format(i), math(tex))
    return body
