"""A 引用 cite button under every display formula of a hand-written page, and ``{{code …}}`` directives.

A reader who quotes a lesson formula in their own derivation needs to say where it came from: the
page and section, the formula's TeX and, where the lesson names it, the code that implements it. The
author names that code with one line per place right after the formula's closing ``$$``::

    $$
    \\operatorname{RMSNorm}(x) = …
    $$
    {{code layernorm.py › RMSNorm.rms_forward › x.mul_(torch.rsqrt(var + self.eps))}}

``file › symbol`` names a function or class (its ``def`` line), ``file › symbol › statement`` one
statement of it — the anchors notes and ``{{value …}}`` use, never a line number, so a moved line is
found again and a changed one is one :class:`UserError` line. Each formula becomes the formula plus a
``data-cite-text`` element holding the button (annotate.js copies it, as for ``{{value}}``); its text
is :func:`formula_citation`. A ``{{code`` line anywhere else, an unknown or ambiguous anchor and a
malformed directive are each one line naming the page and line.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping

from annotate.errors import UserError
from annotate.links import FileFacts
from annotate.markdown_scan import prose_lines
from annotate.pages.lesson.lesson_values import SEP
from annotate.pages.source.source_page import cite_head
from annotate.pages.base.tracefmt import esc
from annotate.project import DOCS_FOLDER
from annotate.references import find_file
from annotate.source import AnchorError, SourceFile

DIRECTIVE = re.compile(r"^(?P<indent>\s*)\{\{code(?P<body>(?:\s.*?)?)\}\}\s*$")
HEADING = re.compile(r"^(?P<level>#{1,6})\s+(?P<text>.*?)\s*(?:\{[^}]*\})?\s*$")
NO_CODE = "实现 code: 本课没有指明实现它的代码 the lesson names no code for it"


@dataclass(frozen=True)
class CodeRef:
    """One place of vendored code a formula names: where, which symbol, the upstream permalink (or None)."""

    path: str
    line: int
    symbol: str
    owner: str
    permalink: str | None

    def cite_lines(self) -> list[str]:
        """The two citation lines of this place: file:line · symbol, then the upstream permalink."""
        return [f"实现 code: {self.path}:{self.line} · {self.symbol}",
                "上游 upstream: " + (self.permalink or "本地独有，无上游链接 local-only: no upstream permalink")]


def resolve_code(body: str, sources: Mapping[str, SourceFile], files: Mapping[str, FileFacts] | None,
                 where: str) -> CodeRef:
    """The place a directive body (``file › symbol [› statement]``) names; one UserError line if it names none
    or more than one."""
    parts = [p.strip() for p in body.split(SEP)]
    if len(parts) not in (2, 3) or not all(parts):
        raise UserError(f"{where}: {{{{code{body}}}}} needs 'file › symbol' or 'file › symbol › statement' "
                        "separated by ' › '")
    name, symbol = parts[0], parts[1]
    statement = parts[2] if len(parts) == 3 else None
    path = find_file(name, list(sources), f"{where}: {{{{code …}}}}")
    source = sources[path]
    try:
        line = source.find(symbol, statement)[0]
        count = len(source.matches(symbol, statement)) if statement else 1
    except (AnchorError, KeyError) as exc:
        raise UserError(f"{where}: {{{{code …}}}}: {exc}; fix the symbol or statement text") from None
    if count > 1:
        raise UserError(f"{where}: {{{{code …}}}}: statement {statement!r} occurs {count} times in {symbol} of "
                        f"{path}; quote more of it so it names one statement")
    facts = (files or {}).get(path)
    return CodeRef(path, line, symbol, facts.owner if facts else "nano-vllm",
                   facts.permalink(line) if facts else None)


def formula_citation(title: str, page: str, section: str, tex: str, refs: list[CodeRef]) -> str:
    """What a formula's 引用 button copies: lesson and framework, page and section, the TeX, then each place of
    code the lesson names for it (annotate.js appends the derivation line)."""
    head = cite_head(refs[0].owner if refs else "nano-vllm")
    lines = [head, f"页面 page: {title} ({page})" + (f" · § {section}" if section else ""),
             f"公式 formula (TeX): {tex.strip()}"]
    for ref in refs:
        lines += ref.cite_lines()
    return "\n".join(lines if refs else [*lines, NO_CODE])


def cite_html(indent: str, text: str) -> str:
    """The element annotate.js's ``citation()`` reads (``data-cite-text``) holding the 引用 button; kept out of
    the search index (``data-search-exclude``: a teaser is the lesson's words, not a button's)."""
    data = esc(text).replace("\n", "&#10;")
    return (f'{indent}<div class="an-formula-cite" data-search-exclude data-cite-text="{data}">'
            '<button type="button" class="an-cite" data-cite="text" title="复制公式的引用 Copy the formula\'s citation" '
            'aria-label="复制公式的引用 Copy the formula\'s citation">引用 cite</button></div>')


@dataclass
class _Scan:
    """Where the scan is: the page title and the current section heading."""

    title: str
    section: str = ""

    def heading(self, text: str) -> None:
        m = HEADING.match(text.strip())
        if m and len(m.group("level")) == 1 and not self.title:
            self.title = m.group("text")
        elif m and len(m.group("level")) > 1:
            self.section = m.group("text")


def _formula_end(lines: list[str], start: int, prose: set[int]) -> int:
    """Index of the line closing the display formula opened at ``start`` (``$$`` alone or ``… $$``)."""
    opened = lines[start].strip()
    if len(opened) > 4 and opened.endswith("$$"):
        return start
    for i in range(start + 1, len(lines)):
        if i + 1 in prose and lines[i].strip().endswith("$$"):
            return i
    return start


def _tex(lines: list[str], start: int, end: int) -> str:
    body = "\n".join(x.strip() for x in lines[start:end + 1])
    return body.strip()[2:-2].strip()


def expand(markdown: str, page: str, sources: Mapping[str, SourceFile], folder: str = DOCS_FOLDER,
           files: Mapping[str, FileFacts] | None = None) -> str:
    """``markdown`` (page ``page``, docs-relative) with a cite button after every display formula and its
    ``{{code …}}`` lines resolved into that button's citation (see the module docstring)."""
    if "$$" not in markdown and "{{code" not in markdown:
        return markdown
    lines = markdown.split("\n")
    masked = dict(prose_lines(markdown))
    prose = set(masked)
    scan, out, i = _Scan(title=""), [], 0
    while i < len(lines):
        text = masked.get(i + 1)
        if text is None:
            out.append(lines[i])
            i += 1
            continue
        scan.heading(text)
        where = f"{folder}/{page}:{i + 1}"
        if DIRECTIVE.match(text) or "{{code" in text:
            raise UserError(f"{where}: {{{{code …}}}} must stand on its own line right after a display "
                            "formula's closing $$; move it there")
        if not text.strip().startswith("$$"):
            out.append(lines[i])
            i += 1
            continue
        end = _formula_end(lines, i, prose)
        tex, indent = _tex(lines, i, end), text[:len(text) - len(text.lstrip())]
        refs, k = [], end + 1
        while k < len(lines) and (m := DIRECTIVE.match(masked.get(k + 1, ""))):
            refs.append(resolve_code(m.group("body"), sources, files, f"{folder}/{page}:{k + 1}"))
            k += 1
        cite = formula_citation(scan.title or page, page, scan.section, tex, refs)
        out += [*lines[i:end + 1], "", cite_html(indent, cite), ""]
        i = k
    return "\n".join(out)
