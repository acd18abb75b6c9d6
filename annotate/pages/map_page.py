"""The generated 三框架映射 · Three-framework map page: one decoder block in nano-vllm, HF transformers, vLLM.

Its data is ``map/decoder-block.yml``: rows (the steps of one block), one cell per framework, each a
list of symbolic anchors (file › symbol › statement, ``nth``) and which variable holds which math
value after the step. Nothing holds a line number: every anchor is resolved here against the
vendored file of its upstream; an anchor that does not resolve is a problem (the strict build fails).
Each statement links to its source page line (``…/modeling_qwen3.py.html#L270``, which highlights it)
and to the upstream permalink at the pin; the statement text shown comes from the vendored file.
"""
from __future__ import annotations

import html
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from annotate import codec
from annotate.anchors import Anchor, Resolution, resolve
from annotate.codec import read_text
from annotate.links import Links, page_url
from annotate.notes import CheckEntry, Sources, parse_yaml

MAP_FILE = "map/decoder-block.yml"
MAP_URI = "map.md"
FRAMEWORKS = {"nano-vllm": "nano-vllm", "transformers": "HF transformers", "vllm": "vLLM"}
FIX = f"fix {MAP_FILE} (see its header comment for the format)"


@dataclass(frozen=True)
class Cell:
    anchors: tuple[Anchor, ...]
    holds: dict[str, str] = field(default_factory=dict)
    zh: str = ""
    en: str = ""


@dataclass(frozen=True)
class Row:
    step: str
    zh: str
    en: str
    cells: dict[str, Cell]


@dataclass
class MapPage:
    """The page's Markdown, the anchors that did not resolve, and the multi-line spans it links to."""

    markdown: str
    problems: list[str]
    ranges: dict[str, set[tuple[int, int]]]


def load_map(root: Path) -> list[Row] | None:
    """The rows of the map file, validated; None when the project has no map file."""
    path = root / MAP_FILE
    if not path.is_file():
        return None
    data = parse_yaml(read_text(path, MAP_FILE), MAP_FILE)
    at = codec.At(MAP_FILE, fix=FIX)
    top = codec.obj(data, at)
    rows = codec.field(top, "rows", at, codec.array)
    return [_row(item, at.key("rows").index(i)) for i, item in enumerate(rows)]


def _text(value: Any, at: codec.At) -> str:
    return codec.string(value, at)


def _row(value: Any, at: codec.At) -> Row:
    row = codec.obj(value, at)
    cells_at = at.key("cells")
    cells = codec.field(row, "cells", at, codec.obj)
    unknown = sorted(set(cells) - set(FRAMEWORKS) - {"__line__"})
    if unknown:
        cells_at.key(unknown[0]).fail(f"one of {', '.join(FRAMEWORKS)}", unknown[0])
    return Row(step=codec.field(row, "step", at, _text), zh=codec.field(row, "zh", at, _text),
               en=codec.field(row, "en", at, _text),
               cells={name: _cell(cells[name], cells_at.key(name), row.get("step", "?"), name)
                      for name in FRAMEWORKS if name in cells})


def _cell(value: Any, at: codec.At, step: str, framework: str) -> Cell:
    cell = codec.obj(value, at)
    anchors = codec.field(cell, "anchors", at, codec.array)
    holds = {k: codec.string(v, at.key("holds").key(k)) for k, v in
             codec.field(cell, "holds", at, codec.obj, {}).items() if k != "__line__"}
    return Cell(anchors=tuple(_anchor(a, at.key("anchors").index(i), f"{MAP_FILE}: {step} › {framework}")
                              for i, a in enumerate(anchors)),
                holds=holds, zh=codec.field(cell, "zh", at, _text, ""), en=codec.field(cell, "en", at, _text, ""))


def _anchor(value: Any, at: codec.At, origin: str) -> Anchor:
    item = codec.obj(value, at)
    return Anchor(path=codec.field(item, "file", at, _text), symbol=codec.field(item, "symbol", at, _text),
                  statement=codec.field(item, "statement", at, _text),
                  nth=codec.field(item, "nth", at, lambda v, a: codec.integer(v, a, 0), 0), origin=origin)


def render_map(root: Path, rows: list[Row], links: Links, sources: Sources | None = None) -> MapPage:
    """Resolve every anchor and write the page (Chinese first); unresolved anchors become problems."""
    sources = sources or Sources(root)
    problems: list[str] = []
    ranges: dict[str, set[tuple[int, int]]] = {}
    head = "".join(f"<th>{html.escape(title)}</th>" for title in FRAMEWORKS.values())
    body = []
    for row in rows:
        cells = []
        for name in FRAMEWORKS:
            cell = row.cells.get(name)
            cells.append(f'<td data-framework="{name}">{_render_cell(cell, sources, links, problems, ranges)}</td>'
                         if cell else f'<td data-framework="{name}">—</td>')
        body.append(f'<tr id="step-{html.escape(row.step)}"><th scope="row">{html.escape(row.zh)}'
                    f'<br><span lang="en">{html.escape(row.en)}</span></th>{"".join(cells)}</tr>')
    markdown = (f"---\ntitle: 三框架映射 · Three-framework map\n---\n# 三框架映射 · Three-framework map\n\n"
                f"{_intro(links)}\n\n"
                f'<div class="an-map"><table><thead><tr><th>步骤 Step</th>{head}</tr></thead>'
                f'<tbody>{"".join(body)}</tbody></table></div>\n')
    return MapPage(markdown, problems, ranges)


def _intro(links: Links) -> str:
    pins = []
    for vendor in links.registry.all:
        lock = links.registry.lock(vendor)
        pins.append(f"{FRAMEWORKS.get(vendor.name, vendor.name)}: {html.escape(lock.upstream.pin_words)}")
    return ("同一个解码块在三个框架里逐行对照：每格是该步骤的语句（链接到本站源码页的对应行，↗ 是上游固定版本的链接），"
            "以及这一步之后哪个代码变量装着 x、x₁、x₂。HF transformers 是课本写法（层里直接相加，返回 x₂）；"
            "nano-vllm 与 vLLM 用两个变量，把残差加法融合进下一个 RMSNorm。所有行号都在构建时由符号锚点解析得到。\n\n"
            "One decoder block, line by line, in three frameworks: each cell holds the step's statements (linked to the "
            "line on this site's source page; ↗ is the upstream permalink at the pin) and which code variable holds "
            "x, x₁, x₂ after it. HF transformers writes the textbook form (adds inside the layer, returns x₂); "
            "nano-vllm and vLLM use two variables and fuse the residual add into the next RMSNorm. Every line number "
            "is resolved at build time from symbolic anchors.\n\n"
            "固定版本 Pins — " + "; ".join(pins))


def _render_cell(cell: Cell, sources: Sources, links: Links, problems: list[str],
                 ranges: dict[str, set[tuple[int, int]]]) -> str:
    parts = []
    for anchor in cell.anchors:
        resolution = resolve(anchor, sources.get(anchor.path))
        if not resolution.ok or resolution.span is None:
            problems.append(CheckEntry(resolution).line())
            parts.append(f'<div class="an-ref-broken">{html.escape(anchor.label)}: {html.escape(resolution.describe())}</div>')
            continue
        parts.append(_statement(anchor, resolution, sources, links, ranges))
    if cell.holds:
        held = ", ".join(f"<code>{html.escape(var)}</code> = {html.escape(math)}" for var, math in cell.holds.items())
        parts.append(f'<div class="an-map-holds">之后 after: {held}</div>')
    if cell.zh:
        parts.append(f'<div class="an-map-note">{html.escape(cell.zh)}'
                     + (f'<br><span lang="en">{html.escape(cell.en)}</span>' if cell.en else "") + "</div>")
    return "".join(parts) or "—"


def _statement(anchor: Anchor, resolution: Resolution, sources: Sources, links: Links,
               ranges: dict[str, set[tuple[int, int]]]) -> str:
    start, end = resolution.span  # type: ignore[misc]
    source = sources.get(anchor.path)
    assert source is not None
    first = source.lines[start - 1].strip()
    text = first + (" …" if end > start else "")
    name = anchor.path.rsplit("/", 1)[-1]
    where = f"{name}:{start}" + (f"–{end}" if end > start else "")
    local = page_url(MAP_URI, anchor.path, start)
    if end > start:
        local = local.rsplit("#", 1)[0] + f"#L{start}-L{end}"
        ranges.setdefault(anchor.path, set()).add((start, end))
    permalink = links.permalink(anchor.path, start, end)
    up = (f' <a class="an-upstream" href="{html.escape(permalink)}" title="upstream at the pin">↗</a>'
          if permalink else ' <span class="an-local">(本地独有 local-only)</span>')
    return (f'<div class="an-map-stmt"><a class="an-map-line" href="{html.escape(local)}">{html.escape(where)}</a>'
            f"{up} <code>{html.escape(text)}</code></div>")
