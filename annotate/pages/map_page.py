"""The generated 三框架映射 · Three-framework map page: one decoder block in nano-vllm, HF transformers, vLLM.

Its data is ``map/decoder-block.yml`` (read by :mod:`annotate.framework_map`): every anchor is
resolved here against the vendored file of its upstream; an anchor that does not resolve is a
problem (the strict build fails). Each statement links to its source page line
(``…/modeling_qwen3.py.html#L270``, which highlights it) and to the upstream permalink at the pin;
the statement text shown comes from the vendored file.
"""
from __future__ import annotations

import html
from dataclasses import dataclass
from pathlib import Path

from annotate.anchors import Anchor, Resolution, resolve
from annotate.framework_map import FRAMEWORKS, MAP_FILE, Cell, Row, load_map
from annotate.links import Links, page_url
from annotate.notes import CheckEntry, Sources

MAP_URI = "map.md"
__all__ = ["FRAMEWORKS", "MAP_FILE", "MAP_URI", "MapPage", "load_map", "render_map"]


@dataclass
class MapPage:
    """The page's Markdown, the anchors that did not resolve, and the multi-line spans it links to."""

    markdown: str
    problems: list[str]
    ranges: dict[str, set[tuple[int, int]]]


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
