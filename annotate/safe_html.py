"""The one way text from notes, docs, the lock or a trace becomes page HTML: sanitised.

Note prose (``zh``/``en``), page intros and the hand-written pages under ``docs/`` are Markdown
that may carry raw HTML. Everything they produce passes :func:`clean` (the ``nh3`` sanitiser, a
binding of the Ammonia crate): an allow-list of tags and attributes, no ``<script>``/``<style>``
(their content is dropped), no ``on*`` event handler, and URLs only ``http``, ``https``,
``mailto`` or relative, so no ``javascript:`` or ``data:`` link can reach a page. KaTeX's output
is added after cleaning, from formulas rendered with ``trust: false`` (no ``\\href`` or HTML).

Text that must read exactly as written (an experiment's title and hypothesis) is not Markdown at all:
:func:`literal` makes it inert to HTML, to Markdown and to the build's own ``{{…}}``/``[[…]]``/``$…$``
expansions, and :func:`single_line` keeps a title on one line (front matter, headings, table rows).
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


#: what Markdown, the math pass or the build's {{value}}/[[ref]] expansions could read in a text: written as entities
_MARKUP = re.compile(r"[\\`*_{}\[\]()#+!|~$:<>&\"']")
_BREAKS = re.compile(r"\r\n|[\r\n\v\f\x1c-\x1e\x85\u2028\u2029]")


def single_line(text: str) -> str:
    """``text`` with every run of white space (line breaks included) as one space: a title's one line."""
    return " ".join(text.split())


def literal(text: str) -> str:
    """``text`` as HTML that shows exactly these characters, line breaks as ``<br>``: every character Markdown,
    HTML or the build's expansions would read is a numeric entity, so no link, tag or formula can form, and
    no blank line can end the raw HTML block it sits in."""
    lines = (_MARKUP.sub(lambda m: f"&#{ord(m.group(0))};", line) for line in _BREAKS.split(text))
    return "<br>".join(lines)
