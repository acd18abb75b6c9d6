"""One vendored file -> the Markdown of its page: banner, symbols, code rows, notes, data blob.

The page shows the whole file with its own local line numbers. Each code line is a row with
``id="L<n>"`` (so ``#L36`` works without script) and ``data-line``; each resolved note is a card
placed right under its statement (or above its symbol), always visible, so it reads on a phone
without hovering. The HTML contains no blank line, so Markdown passes it through untouched.
"""
from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Sequence

from annotate.links import LOCAL_ONLY, FileFacts, page_anchor
from annotate.pages.base.extras import LineExtras
from annotate.tex_text import tex_text
from annotate.render.katex import display_parts
from annotate.render.held import hold
from annotate.pages.base.highlight import highlight_lines, wrap_points
from annotate.safe_html import prose
from annotate.framework_map import FRAMEWORKS
from annotate.source import SourceFile
from annotate.vendoring.linemap import format_ranges
from annotate.vendoring.status import FileStatus
from annotate.pages.base.snapshot import PlacedNote

__all__ = ["CITE_HEAD", "MathFn", "cite_head", "PageInput", "lean_math", "render_page"]

MathFn = Callable[[str, bool], str]  # (tex, display) -> HTML; raises on bad LaTeX
# the course lesson these pages belong to: the first line of every citation a reader copies
CITE_HEAD = "第 20 课 · lesson 20 — Transformer 逐步拆解"


def cite_head(owner: str) -> str:
    """The first line of a citation copied from a file of upstream `owner`: the lesson, then the framework
    the cited file belongs to (HF transformers' page must not say nano-vllm)."""
    return f"{CITE_HEAD} · {FRAMEWORKS.get(owner, owner)}"


@dataclass(frozen=True)
class PageInput:
    """Everything one page needs: facts from the build's snapshot (:mod:`annotate.pages.base.snapshot`)."""

    facts: FileFacts
    notes: Sequence[PlacedNote]
    math: MathFn
    intro: dict[str, str] = field(default_factory=dict)
    extras: Sequence[LineExtras] = ()
    ranges: Sequence[tuple[int, int]] = ()  # line ranges linked from elsewhere: get an `id="L28-L40"`

    @property
    def source(self) -> SourceFile:
        """The parsed file (a page is only made for a Python file)."""
        assert self.facts.source is not None, self.facts.path
        return self.facts.source


_MATHML = re.compile(r'<span class="katex-mathml">.*?</math></span>', re.S)


def lean_math(math: MathFn) -> MathFn:
    """KaTeX output without its hidden MathML copy: the page's math weighs a third less.

    The TeX becomes the formula's accessible name (``role="img" aria-label``; each statement its own when the
    formula is set as parts, see annotate.render.katex.display_parts), which annotate.js puts on the
    clipboard when a reader copies a selection with math in it. The search index reads the formula as
    Unicode text (``10⁻⁶``, ``ℝ^(F×H)``, :mod:`annotate.tex_text`) from a hidden span beside it: KaTeX's
    boxes read as text flatten it (``10−6``, ``RF×H``), so they are kept out of the index by a wrapper
    Material's parser skips (``data-search-exclude``; an element of its own tag, ``<an-formula>``: the
    parser ends a skip at the first closing tag of the same name, and KaTeX is spans within spans). Both
    are gone from the written page (the index is made before the page is written:
    annotate.search_index.strip_search_only), so the page weighs what it did."""
    def render(tex: str, display: bool) -> str:
        out = math(tex, display)
        parts = display_parts(tex) if display else [tex]   # a formula set as parts: each names its own TeX
        if out.count('<span class="katex">') != len(parts):
            parts = [tex]
        out = _MATHML.sub("", out, count=len(parts))
        out = out.replace('<span class="katex-html" aria-hidden="true">', '<span class="katex-html">', len(parts))
        for part in parts:
            out = out.replace('<span class="katex">', f'<span class="katex" role="img" aria-label="{html.escape(part)}">', 1)
        return (f'<an-formula data-search-exclude>{out}</an-formula>'
                f'<span class="an-tex-text" hidden>{html.escape(tex_text(tex))}</span>')
    return render


def render_page(page: PageInput) -> str:
    """The page's Markdown text."""
    page = replace(page, math=lean_math(page.math))
    path = page.source.path
    parts = [f"---\ntitle: {path.rsplit('/', 1)[-1]}\nhide:\n  - toc\n---\n", f"# {path}\n", banner(page), ""]
    for html_ in (e.banner_html(path) for e in page.extras):
        parts += [html_, ""] if html_ else []
    if page.intro:
        parts += [_texts(page.intro, page.math, "an-intro"), ""]
    # the big blocks pass Markdown untouched: held back from its HTML scans (annotate/render/held.py)
    parts += [hold(symbols_table(page)), "", goto(page), "", hold(code(page)), "", hold(data_blob(page)), ""]
    return "\n".join(parts)


def _state_words(status: FileStatus) -> str:
    """The banner's bilingual wording of `vendor status`'s verdict for this file."""
    local = format_ranges(status.local_only)
    if status.state == "local-only file":
        return "本地独有文件，上游没有 — local-only file: not in the pinned upstream commit, no permalinks"
    if status.state == "identical":
        return "与上游逐字节相同 — identical to upstream (same git blob)"
    if status.local_only:
        return (f"与上游不同：本地独有行 {local} 没有上游链接 — differs from upstream: "
                f"local-only lines {local} have no upstream permalink")
    return "与上游行内容相同，字节不同 — same lines as upstream, other bytes (line endings)"


def banner(page: PageInput) -> str:
    """Provenance: where the copy comes from, the upstream pin and date, identical or not."""
    path = page.source.path
    lock = page.facts.lock
    up = lock.upstream
    commit_link = up.file_url(path)
    state = _state_words(page.facts.status)
    date = f" ({up.committed[:10]})" if up.committed else ""
    pin = (f'<code>{up.commit[:10]}</code></a>{date}' if up.commit else
           f'<code>{html.escape(up.tag)}</code></a> — {html.escape(up.pin_words)}')
    return ('<div class="an-banner">'
            f'<div><b>来源 Source</b> {html.escape(lock.source.describe())}</div>'
            f'<div><b>上游 Upstream</b> <a href="{html.escape(commit_link)}" title="{html.escape(up.ref)}">'
            f'{html.escape(_repo_name(up.repo))} @ {pin}</div>'
            f'<div class="an-state"><b>状态 State</b> {html.escape(state)}</div></div>')


def _repo_name(url: str) -> str:
    return "/".join(url.rstrip("/").split("/")[-2:])


def symbols_table(page: PageInput) -> str:
    """Every class and function with its local lines and its upstream permalink."""
    rows = []
    for sym in sorted(page.source.symbols.values(), key=lambda s: s.start_line):
        a, b = sym.span
        link = page.facts.permalink(a, b)
        up = (f'<a class="an-upstream" href="{html.escape(link)}">upstream ↗</a>' if link else
              f'<span class="an-local" title="{html.escape(LOCAL_ONLY)}">local-only</span>')
        rows.append(f'<tr><td><a href="{page_anchor(a, b)}"><code>{html.escape(sym.qualname)}</code></a></td>'
                    f'<td>{sym.kind}</td><td>{a}–{b}</td><td>{up}</td></tr>')
    return ('<details class="an-symbols"><summary>符号与上游链接 Symbols and upstream permalinks '
            f'({len(rows)})</summary><table><thead><tr><th>symbol</th><th>kind</th><th>lines</th>'
            f'<th>upstream</th></tr></thead><tbody>{"".join(rows)}</tbody></table></details>')


def goto(page: PageInput) -> str:
    """The skip control: jump (and move focus) to line N without tabbing through the code."""
    n = len(page.source.lines)
    return ('<form class="an-goto" action="#" role="search" aria-label="跳到某一行 Go to a line">'
            f'<label>跳到第 <input type="number" name="line" min="1" max="{n}" inputmode="numeric" '
            f'aria-label="行号 line number (1–{n})"> 行 Go to line</label> '
            '<button type="submit">跳转 Go</button></form>')


def code(page: PageInput) -> str:
    """The whole file as rows, cut into segments around the note cards."""
    path = page.source.path
    html_lines = highlight_lines(page.source.text)
    cards = _cards_by_slot(page)
    marks = _marks(page.notes)
    out, segment = [f'<div class="an-source highlight" data-path="{html.escape(path)}">'], list[str]()
    for number, line_html in enumerate(html_lines, start=1):
        before = cards.get((number, "before"), [])
        if before:
            out += _flush(segment) + before
        segment += [f'<span class="an-range" id="L{a}-L{b}"></span>' for a, b in sorted(set(page.ranges))
                    if a == number and b > a]
        segment.append(row(page, number, line_html, marks.get(number, ())))
        after = [x for x in (e.line_html(path, number) for e in page.extras) if x]
        after += cards.get((number, "after"), [])
        if after:  # extras (values panels) and note cards sit between code segments, at page width
            out += _flush(segment) + after
    out += _flush(segment) + ["</div>"]
    return "".join(out)


def _flush(segment: list[str]) -> list[str]:
    if not segment:
        return []
    block = ['<div class="an-seg"><div class="an-seg-inner">', *segment, "</div></div>"]
    segment.clear()
    return block


def _marks(notes: Sequence[PlacedNote]) -> dict[int, tuple[int, ...]]:
    """Line -> indexes of the notes that line carries a marker for (a statement's first line)."""
    marks: dict[int, tuple[int, ...]] = {}
    for placed in notes:
        if not placed.note.on_symbol:
            marks[placed.start] = marks.get(placed.start, ()) + (placed.note.index,)
    return marks


def row(page: PageInput, number: int, line_html: str, marks: tuple[int, ...] = ()) -> str:
    """One code line: its number (a link to itself), its highlighted text, markers of its notes."""
    upstream = page.facts.upstream_line(number)
    classes = "an-row" + (" an-noted" if marks else "") + (" an-local" if upstream is None else "")
    # the upstream line, where it differs from the local one (an-local rows have none)
    attrs = (f' data-upstream="{upstream}"' if upstream != number else "") if upstream else \
        f' title="{html.escape(LOCAL_ONLY)}"'
    mark = "".join(f'<a class="an-mark" href="#note-{i}" aria-label="注释 note {i}" title="注释 note {i}">✎</a>'
                   for i in marks)
    # the line's own indentation, for the hanging indent of a line wrapped on a phone (see annotate.css)
    indent = len(line_html) - len(line_html.lstrip(" "))
    style = f' style="--ind:{indent}ch"' if indent else ""
    line_html = _break_points(line_html)
    return (f'<div class="{classes}" id="L{number}" data-line="{number}"{attrs}>'
            f'<a class="an-ln" href="#L{number}" tabindex="-1">{number}</a>'
            f'<code class="an-code"{style}>{line_html or " "}{mark}</code></div>')


def _break_points(line_html: str) -> str:
    """Allow a phone to wrap a long line after `.`, `(` and `,` rather than inside an identifier."""
    return wrap_points(line_html) if len(line_html) > 40 else line_html


def _cards_by_slot(page: PageInput) -> dict[tuple[int, str], list[str]]:
    cards: dict[tuple[int, str], list[str]] = {}
    for placed in sorted(page.notes, key=lambda n: (n.start, n.end)):
        cards.setdefault(placed.slot, []).append(card(page, placed))
    return cards


def card(page: PageInput, placed: PlacedNote) -> str:
    """A note card: where it points, the upstream permalink, the math, the variables, zh then en."""
    note = placed.note
    a, b = placed.start, placed.end
    lines = f"L{a}" if a == b else f"L{a}–{b}"
    link = page.facts.permalink(a, b)
    up = (f'<a class="an-upstream" href="{html.escape(link)}" title="upstream at the pinned commit">upstream ↗</a>'
          if link else f'<span class="an-local" title="{html.escape(LOCAL_ONLY)}">local-only: no upstream permalink</span>')
    # the card's title is a heading (a direct child of the card) with the card's id: the search index makes
    # the card a section of its own, so a hit on a note lands on that note (under its line), not at the top
    head = (f'<h6 class="an-note-title" id="note-{note.index}"><a class="an-note-lines" href="{page_anchor(a, b)}">'
            f'{lines}</a> <code>{html.escape(note.anchor.symbol or "")}</code></h6>'
            f'<div class="an-note-head" data-search-exclude>{up}'
            '<button type="button" class="an-cite" data-cite="note">复制引用 Copy citation</button></div>')
    body = [head]
    if note.math:
        body.append(f'<div class="an-math">{page.math(note.math, True)}</div>')
    if note.vars:
        items = "".join(f'<li><code>{html.escape(k)}</code> ≡ {page.math(v, False)}</li>' for k, v in note.vars.items())
        body.append(f'<ul class="an-vars" title="math variable each code variable holds after this line">{items}</ul>')
    body.append(_texts({"zh": note.zh, "en": note.en}, page.math, ""))
    kind = "an-note an-note-symbol" if note.on_symbol else "an-note"
    return (f'<aside class="{kind}" data-start="{a}" data-end="{b}" '
            f'data-symbol="{html.escape(note.anchor.symbol or "")}">{"".join(body)}</aside>')


def _texts(texts: dict[str, str], math: MathFn, css: str) -> str:
    """Chinese first and always shown; English in a disclosure right below (open on wide screens)."""
    inline = lambda tex: math(tex, False)  # noqa: E731 - a one-line adapter
    out = []
    if texts.get("zh"):
        out.append(f'<div class="an-zh" lang="zh-CN">{prose(texts["zh"], inline)}</div>')
    if texts.get("en"):
        out.append(f'<details class="an-en" lang="en"><summary>English</summary>'
                   f'{prose(texts["en"], inline)}</details>')
    inner = "".join(out).replace("\n", "")
    return f'<div class="{css}">{inner}</div>' if css else inner


def data_blob(page: PageInput) -> str:
    """The page's JSON data (path, pin, notes with their lines and vars) plus the providers' keys."""
    lock = page.facts.lock
    data: dict[str, Any] = {
        "path": page.source.path,
        "lines": len(page.source.lines),
        # the upstream file at the pin, built by the one function that builds every upstream URL (the script
        # only appends `#L<a>-L<b>`)
        "upstream": {"file": lock.upstream.file_url(page.source.path), "ref": lock.upstream.ref},
        "cite": cite_head(page.facts.owner),
        "symbols": [{"name": s.qualname, "start": s.span[0], "end": s.span[1]}
                    for s in sorted(page.source.symbols.values(), key=lambda s: s.start_line)],
        "notes": [{"id": f"note-{n.note.index}", "symbol": n.note.anchor.symbol, "start": n.start, "end": n.end,
                   "vars": n.note.vars} for n in page.notes],
    }
    for extra in page.extras:
        data.update(extra.page_data(page.source.path))
    text = json.dumps(data, ensure_ascii=False, sort_keys=True).replace("</", "<\\/")
    return f'<script type="application/json" id="an-page-data">{text}</script>'
