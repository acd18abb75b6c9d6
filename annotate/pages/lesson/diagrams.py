"""HTML of the element-level diagrams (docs/diagrams.md), generated at build time.

A hand-written page places a diagram with a line of its own::

    {{diagram swiglu}}

which Markdown turns into ``<p>{{diagram swiglu}}</p>``; :func:`expand` (called by the plugin on the
page's HTML) replaces it by the diagram. The data is :mod:`annotate.lesson.diagrams`; here it is only
drawn: each vector/matrix is a table in its own scroll box, with its axes and indices; a cell with a
formula is a ``<button>`` (focusable, Enter/Space), the rest are ``<span>``s. Each diagram carries
its dependency sets and formulas as JSON (``<script type="application/json" class="dg-data">``), which
``docs/js/diagrams.js`` reads; counterexamples are ``<button aria-expanded>`` toggles over a panel.
A selected cell's formula and each counterexample carry a 引用 cite button (annotate.js copies the
``data-cite-text`` beside it): the diagram, the cell or the claim, its numbers, the vendored code that
computed them (:data:`CODE`, resolved to file:line and upstream permalink) and, for the traced diagram,
the trace. Everything that reaches the page is escaped.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
import re
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping

from annotate.claims import ClaimError, claims_table
from annotate.lesson.diagrams import (COUNTEREXAMPLE_REF, PAGE, Block, Cell, Counterexample, Diagram,
                                      all_diagrams, counterexample_numbers, n, order_problem, ref_problems)
from annotate.links import FileFacts
from annotate.project import DOCS_FOLDER, Project
from annotate.pages.lesson.lesson_formulas import CodeRef, resolve_code
from annotate.pages.source.source_page import cite_head
from annotate.pages.base.tracefmt import esc, sup_label
from annotate.source import SourceFile

if TYPE_CHECKING:
    from annotate.lesson.table import Table

#: the vendored code each diagram and counterexample runs (annotate/lesson/ runs it), by key, as
#: ``file › symbol [› statement]`` anchors (the ``{{code …}}`` syntax); a test resolves every one
CODE: dict[str, tuple[str, ...]] = {
    "swiglu": ("qwen3.py › Qwen3MLP.forward", "activation.py › SiluAndMul.forward › return F.silu(x) * y"),
    "rmsnorm": ("layernorm.py › RMSNorm.rms_forward",),
    "traced": ("layernorm.py › RMSNorm.add_rms_forward",),
    "swap": ("qwen3.py › Qwen3MLP.forward", "activation.py › SiluAndMul.forward › x, y = x.chunk(2, -1)"),
    "relu": ("qwen3.py › Qwen3MLP.forward",),
    "layernorm": ("layernorm.py › RMSNorm.rms_forward",),
    "axis": ("layernorm.py › RMSNorm.rms_forward",),
    "x2": ("layernorm.py › RMSNorm.add_rms_forward",),
    "order": ("layernorm.py › RMSNorm.add_rms_forward", "layernorm.py › RMSNorm.rms_forward"),
}
CITE_BUTTON = ('<button type="button" class="an-cite" data-cite="text" title="{what}" aria-label="{what}">'
               '引用 cite</button>')


@dataclass(frozen=True)
class CiteFacts:
    """What a diagram's citations name beyond the diagram: the vendored code (resolved when the build's
    sources are known) and the trace the traced diagram read."""

    sources: Mapping[str, SourceFile] | None = None
    files: Mapping[str, FileFacts] | None = None
    trace: str = ""   # "运行 trace: traces/cpu · provenance" for the traced diagram, else ""

    def code_lines(self, key: str) -> list[str]:
        """The code lines of a diagram's or counterexample's citation: file:line · symbol and permalink."""
        lines: list[str] = []
        for anchor in CODE.get(key, ()):
            if self.sources is None:
                lines.append(f"实现 code: {anchor}")
                continue
            ref: CodeRef = resolve_code(anchor, self.sources, self.files, f"annotate/pages/lesson/diagrams.py: CODE[{key!r}]")
            lines += ref.cite_lines()
        return lines

    def owner(self, key: str) -> str:
        anchor = next(iter(CODE.get(key, ())), "")
        if self.sources is None or not anchor:
            return "nano-vllm"
        return resolve_code(anchor, self.sources, self.files, f"annotate/pages/lesson/diagrams.py: CODE[{key!r}]").owner

_MARKER = re.compile(r"<p>\{\{diagram ([a-z0-9_]+)\}\}</p>")
_CODE = re.compile(r"`([^`<>]+)`")


def diagram_text(text: str) -> str:
    """Escaped text of a diagram with `code` spans as <code> and layer superscripts as digits (x₂⁽¹⁾)."""
    return _CODE.sub(r"<code>\1</code>", esc(sup_label(text)))


def cell_html(diagram: str, cell: Cell) -> str:
    attrs = f'class="dg-cell" data-cell="{esc(cell.id)}"'
    shown = cell.shown or n(cell.value)
    if cell.interactive:
        label = f"{cell.id}：{shown}（点击看算式 click for its arithmetic）"
        return (f'<button type="button" {attrs} data-deps="{esc(" ".join(cell.deps))}" '
                f'aria-label="{esc(label)}" aria-controls="dg-{esc(diagram)}-formula">{esc(shown)}</button>')
    return f'<span {attrs}>{esc(shown)}</span>'


def block_html(diagram: Diagram, block: Block) -> str:
    head = "".join(f'<th scope="col">{esc(c)}</th>' for c in block.col_labels)
    rows = []
    for r, (label, ids) in enumerate(zip(block.row_labels, block.rows)):
        if r in block.row_groups:
            rows.append(f'<tr class="dg-group"><th colspan="{len(block.col_labels) + 1}">{esc(block.row_groups[r])}</th></tr>')
        tds = "".join(f"<td>{cell_html(diagram.key, diagram.cells[i])}</td>" for i in ids)
        rows.append(f'<tr><th scope="row">{esc(label)}</th>{tds}</tr>')
    corner = (f'<span class="dg-ax">{esc(block.col_axis)} →</span>' if block.col_axis else "") + \
        (f'<span class="dg-ax">{esc(block.row_axis)} ↓</span>' if block.row_axis else "")
    return (f'<figure class="dg-block" data-block="{esc(block.key)}"><figcaption><span class="dg-sym">{esc(block.symbol)}</span> '
            f'{esc(block.title)} <span class="dg-shape">{esc(block.shape)}</span></figcaption>'
            f'<div class="dg-scroll" tabindex="0" role="region" aria-label="{esc(block.symbol)} {esc(block.shape)}">'
            f'<table class="dg-mat"><thead><tr><th scope="col" class="dg-corner">{corner}</th>{head}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table></div></figure>')


def counterexample_title(ce: Counterexample, number: int) -> str:
    """``反例 3：… · Counterexample 3: …``: the number is the counterexample's place on the page."""
    return f"反例 {number}：{ce.title} · Counterexample {number}: {ce.title_en}"


def _plain(text: str) -> str:
    """A diagram's text as a citation copies it: layer superscripts as digits, no Markdown backticks."""
    return sup_label(text).replace("`", "")


def citation_head(diagram: Diagram, facts: CiteFacts, key: str = "") -> str:
    """The first lines of every citation from a diagram: lesson and framework, then the diagram and its address."""
    return "\n".join([cite_head(facts.owner(key or diagram.key)),
                      f"图解 diagram: {_plain(diagram.title)} ({PAGE}#{diagram.key})"])


def citation_tail(diagram: Diagram, facts: CiteFacts, key: str = "") -> str:
    """The last lines: the vendored code that computed the numbers and, for the traced diagram, the trace."""
    return "\n".join([*facts.code_lines(key or diagram.key), *([facts.trace] if facts.trace else [])])


def cell_what(diagram: Diagram, cell: Cell) -> str:
    """The cell line of a cell's citation: its block (symbol and shape), its id and its value."""
    block = next((b for b in diagram.blocks if any(cell.id in row for row in b.rows)), None)
    where = f"{block.symbol} {block.shape} · " if block else ""
    return f"元素 cell: {where}{cell.id} = {cell.shown or n(cell.value)}"


def diagram_cell_citation(diagram: Diagram, cell: Cell, facts: CiteFacts) -> str:
    """What a selected cell's 引用 button copies; docs/js/diagrams.js joins the same parts from the diagram's
    JSON (``cite.head``, the cell's ``what``, its formula, ``cite.tail``), so the page and this agree."""
    parts = [citation_head(diagram, facts), cell_what(diagram, cell), f"算式 formula: {cell.formula}",
             citation_tail(diagram, facts)]
    return "\n".join(p for p in parts if p)


def counterexample_citation(diagram: Diagram, ce: Counterexample, number: int, facts: CiteFacts) -> str:
    """What a counterexample's 引用 button copies: the diagram, the counterexample, its claim, right against
    wrong values row by row, the measured verdict, the vendored code it ran (and the trace, if traced)."""
    rows = [f"  {_plain(r.label)}: 正确 right {_plain(r.right)} | 错误 wrong {_plain(r.wrong)}" for r in ce.rows]
    parts = [citation_head(diagram, facts, ce.key), f"反例 counterexample: {_plain(counterexample_title(ce, number))}",
             f"论断 claim: {_plain(ce.claim)}", "对比 compared:", *rows, f"结果 verdict: {_plain(ce.verdict)}",
             citation_tail(diagram, facts, ce.key)]
    return "\n".join(p for p in parts if p)


def _cite_attr(text: str) -> str:
    return esc(text).replace("\n", "&#10;")


def counterexample_html(diagram: Diagram, ce: Counterexample, number: int, facts: CiteFacts | None = None) -> str:
    facts = facts or CiteFacts()
    pid = f"dg-{diagram.key}-ce-{ce.key}"
    rows = "".join(f'<tr><th scope="row">{diagram_text(r.label)}</th><td class="dg-right">{diagram_text(r.right)}</td>'
                   f'<td class="dg-wrong">{diagram_text(r.wrong)}</td></tr>' for r in ce.rows)
    return (f'<div class="dg-ce" data-ce="{esc(ce.key)}" data-number="{number}">'
            f'<button type="button" class="dg-ce-toggle" aria-expanded="false" aria-controls="{pid}">'
            f'{diagram_text(counterexample_title(ce, number))}</button>'
            f'<div class="dg-ce-panel" id="{pid}" hidden>'
            f'<p class="dg-ce-claim">{diagram_text(ce.claim)}</p>'
            f'<div class="dg-scroll"><table class="dg-ce-table"><thead><tr><th scope="col"></th>'
            f'<th scope="col">正确读法 Right reading</th><th scope="col">错误读法 Wrong reading</th></tr></thead>'
            f'<tbody>{rows}</tbody></table></div>'
            f'<p class="dg-ce-verdict">{diagram_text(ce.verdict)}</p><p class="dg-ce-why"><strong>为什么错 Why it fails：</strong>'
            f'{diagram_text(ce.why)}</p>'
            f'<p class="dg-ce-cite" data-cite-text="{_cite_attr(counterexample_citation(diagram, ce, number, facts))}">'
            + CITE_BUTTON.format(what="复制这个反例的引用 Copy this counterexample's citation") + '</p></div></div>')


def data_json(diagram: Diagram, facts: CiteFacts | None = None) -> str:
    """The dependency sets, formulas and citation parts (see :func:`diagram_cell_citation`), as JSON safe inside a
    <script> element."""
    facts = facts or CiteFacts()
    data = {"key": diagram.key,
            "cite": {"head": citation_head(diagram, facts), "tail": citation_tail(diagram, facts),
                     "label": "复制这个元素的引用 Copy this element's citation"},
            "cells": {c.id: {"deps": list(c.deps), "formula": c.formula, "what": cell_what(diagram, c)}
                      for c in diagram.cells.values() if c.interactive}}
    return json.dumps(data, ensure_ascii=False).replace("<", "\\u003c")


def diagram_html(diagram: Diagram, facts: CiteFacts | None = None) -> str:
    """One diagram: its blocks, the formula box, its counterexamples (or its notice); ``facts`` name the code
    and trace its citations cite."""
    facts = facts or CiteFacts()
    key = esc(diagram.key)
    if diagram.notice:
        return f'<div class="dg-diagram dg-missing" data-diagram="{key}"><p class="dg-notice">{diagram_text(diagram.notice)}</p></div>'
    blocks = "".join(block_html(diagram, b) for b in diagram.blocks)
    numbers = counterexample_numbers()
    ces = "".join(counterexample_html(diagram, ce, numbers.get(ce.key, 0), facts) for ce in diagram.counterexamples)
    return (f'<div class="dg-diagram" data-diagram="{key}"><p class="dg-title">{diagram_text(diagram.title)}</p>'
            f'<p class="dg-hint">点击或用 Tab 聚焦带框的数，看它的算式和它依赖的元素。 · Click or Tab to a boxed number to see '
            f'its arithmetic and the elements it depends on.</p>'
            f'<div class="dg-blocks">{blocks}</div>'
            f'<output class="dg-formula" id="dg-{key}-formula" aria-live="polite">'
            f'选一个元素 · pick an element</output>'
            f'<div class="dg-ces">{ces}</div>'
            f'<script type="application/json" class="dg-data">{data_json(diagram, facts)}</script></div>')


def broken_html(key: str, problem: str) -> str:
    return (f'<p class="an-claim-broken dg-broken" title="{esc(problem)}">'
            f'⚠ 图解 {esc(key)} 无法生成 · diagram {esc(key)} cannot be drawn</p>')


def number_refs(page_html: str, where: str, strict: bool = True) -> str:
    """``{{counterexample KEY}}`` -> the counterexample's number on the diagrams page (ClaimError in strict
    mode for a key no diagram draws; ``?`` otherwise)."""
    if "{{counterexample " not in page_html:
        return page_html
    problems = ref_problems(page_html, where)
    if problems and strict:
        raise ClaimError(problems[0])
    numbers = counterexample_numbers()
    return COUNTEREXAMPLE_REF.sub(lambda m: str(numbers.get(m.group(1), "?")), page_html)


def traced_from(claims: Table) -> str:
    """The trace line of the traced diagram's citations (folder and provenance, from its claims; '' without)."""
    got = [claims.claims.get(f"traced.norm.{k}") for k in ("trace", "provenance")]
    if any(c is None or c.problem for c in got):
        return ""
    return f"运行 trace: {Project.TRACES_DIR}/{got[0].value} · {got[1].value}"   # type: ignore[union-attr]


def expand(page_html: str, root: Path, *, strict: bool = True, table: Callable[[], Table] | None = None,
           folder: str = DOCS_FOLDER, page: str = PAGE, sources: Mapping[str, SourceFile] | None = None,
           files: Mapping[str, FileFacts] | None = None) -> str:
    """Replace every ``<p>{{diagram NAME}}</p>`` by its diagram (ClaimError in strict mode on any problem).

    ``table`` gives the build's claims (loaded once per build, ``Snapshot.claims``; default: from
    ``root``); messages name the page as ``folder/page`` (``Project.docs_label``, the page's src uri);
    ``sources`` and ``files`` (the build's) let the citations name the code by file:line and permalink."""
    page_html = number_refs(page_html, f"{folder}/{page}", strict)
    if "{{diagram " not in page_html:
        return page_html
    order = order_problem(_MARKER.findall(page_html), f"{folder}/{page}")
    if order and strict:
        raise ClaimError(order)
    claims = claims_table(root, table)
    try:
        diagrams = all_diagrams(claims, folder)
    except ClaimError as exc:
        if strict:
            raise
        problem = str(exc)
        return _MARKER.sub(lambda m: broken_html(m.group(1), problem), page_html)

    def one(m: re.Match) -> str:
        key = m.group(1)
        if key not in diagrams:
            problem = f"{folder}/{page}: unknown diagram {key!r}; known: {', '.join(diagrams)}"
            if strict:
                raise ClaimError(problem)
            return broken_html(key, problem)
        trace = traced_from(claims) if key == "traced" else ""
        return diagram_html(diagrams[key], CiteFacts(sources, files, trace))

    return _MARKER.sub(one, page_html)
