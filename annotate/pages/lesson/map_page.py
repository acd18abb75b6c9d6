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
from typing import Any, Sequence

from annotate.anchors import Anchor, Resolution
from annotate.framework_map import FRAMEWORKS, MapCell, Row
from annotate.pages.source.source_page import cite_head
from annotate.links import page_anchor, page_url
from annotate.pages.base.highlight import wrap_points
from annotate.pages.lesson.map_truth import NO_TRACE, cell_line, contradictions, float32_words, hf_lines_today
from annotate.pages.source.hf_values import hf_view, shown_hf_lines
from annotate.pages.base.snapshot import Snapshot
from annotate.pages.base.trace_set import TraceSet, TraceView
from annotate.pages.base.tracefmt import num, value_url
from annotate.notes import CheckEntry

MAP_URI = "map.md"
__all__ = ["MAP_URI", "MapPage", "render_map"]


@dataclass
class MapPage:
    """The page's Markdown and the anchors that did not resolve (the spans it links to are the snapshot's ``ranges``)."""

    markdown: str
    problems: list[str]


def render_map(rows: Sequence[Row], facts: Snapshot, traces: TraceSet | None = None) -> MapPage:
    """Write the page from the anchors' resolutions in the build's ``facts`` (Chinese first); unresolved
    anchors become problems.

    ``traces`` (the build's, with a fresh-pinned trace) adds the identities found by comparison: which
    variable on which line of each framework held x, x₁, x₂, from the trace whose HF lines HF's own page
    shows (:func:`annotate.pages.source.hf_values.shown_hf_lines`), or why there are none.
    """
    problems: list[str] = []
    f32 = traces.find(dtype="float32") if traces is not None else None
    hf32 = hf_lines_today(f32, lambda p: facts.files[p].data if p in facts.files else None) if f32 else None
    if f32 is not None:   # a statement about float32 that the float32 trace contradicts fails the strict build
        problems += contradictions(rows, lambda a: _line(facts, a), f32, hf32)
    head = "".join(f"<th>{html.escape(title)}</th>" for title in FRAMEWORKS.values())
    body = []
    for row in rows:
        cells = []
        for name in FRAMEWORKS:
            cell = row.cells.get(name)
            f32_line = float32_words(cell, name, f32, hf32, cell_line(cell, lambda a: _line(facts, a))) \
                if cell and f32 else ""
            cells.append(f'<td data-framework="{name}">{_render_cell(cell, facts, problems, f32, f32_line)}</td>'
                         if cell else f'<td data-framework="{name}">—</td>')
        body.append(f'<tr id="step-{html.escape(row.step)}"><th scope="row">{html.escape(row.zh)}'
                    f'<br><span lang="en">{html.escape(row.en)}</span></th>{"".join(cells)}</tr>')
    markdown = (f"---\ntitle: 三框架映射 · Three-framework map\n---\n# 三框架映射 · Three-framework map\n\n"
                f"{_intro(facts)}\n\n{_float32_intro(f32)}\n\n"
                f'<div class="an-map"><table><thead><tr><th>步骤 Step</th>{head}</tr></thead>'
                f'<tbody>{"".join(body)}</tbody></table></div>\n')
    if traces is not None and traces.find() is not None:
        markdown += "\n" + _identities(rows, facts, traces)
    return MapPage(markdown, problems)


#: the math variables the identities table follows, with their labels
FOLLOWED = (("x", "x"), ("x1", "x₁"), ("rmsnorm2", "RMSNorm₂(x₁)"), ("mlp", "m = MLP(·)"), ("x2", "x₂"))


def _anchored_lines(rows: Sequence[Row], framework: str, facts: Snapshot) -> dict[str, set[int]]:
    """file -> the lines the map's cells of one framework resolve to (every line of a multi-line statement)."""
    out: dict[str, set[int]] = {}
    for row in rows:
        cell = row.cells.get(framework)
        for anchor in cell.anchors if cell else ():
            res = facts.resolution(anchor)
            if res.ok and res.span:
                out.setdefault(anchor.path, set()).update(range(res.span[0], res.span[1] + 1))
    return out


def _nano_hits(trace: Any, lines: dict[str, set[int]], key: str) -> tuple[str, int, str, list[tuple[int, float, float]]] | None:
    """The map line of nano-vllm whose recorded variable is `key` in the most layers, with per-layer max|Δ|
    and ulps at scale (max |Δ| in ulps of the largest value: near-zero sign flips make raw ulps meaningless)."""
    best: tuple[int, tuple[str, int, str, list[tuple[int, float, float]]]] | None = None
    for path, numbers in lines.items():
        for line in sorted(numbers):
            for name in ("residual", "hidden_states", "x", "_"):
                per_layer: dict[int, tuple[float, float]] = {}
                for rec in trace.at(path, line):
                    var = rec.var(name)
                    m = var.matched if var else None
                    if m and m["key"] == key and m["layer"] not in per_layer:
                        per_layer[m["layer"]] = (float(m["max_abs"]), float(m.get("scale_ulps", 0.0)))
                if per_layer and (best is None or len(per_layer) > best[0]):
                    best = (len(per_layer), (path, line, name, [(k, *per_layer[k]) for k in sorted(per_layer)]))
    return best[1] if best else None


def _how_compared(trace: Any, path: str, line: int, var: str) -> str:
    """What kind of value a nano-vllm hit is, when it is not a plain traced one: a value of the eager replay
    of a compiled body, and one held in float32 but compared after rounding to the run's dtype."""
    recs = trace.at(path, line)
    words = []
    if any(r.source == "replay" for r in recs):
        words.append("eager 重放的值 a value of the eager replay")
    held = next((v.dtype for r in recs if (v := r.var(var)) is not None), None)
    if held == "float32" and trace.meta.get("dtype") != "float32":
        words.append(f"float32 值舍入到 {trace.meta.get('dtype')} 后比较 the float32 value compared after rounding to "
                     f"{trace.meta.get('dtype')}")
    return f'<br><span class="an-map-how">（{html.escape("；".join(words))}）</span>' if words else ""


def _hf_hit(hf: dict[str, Any], lines: set[int], key: str) -> tuple[int, str] | None:
    """The map line of HF whose traced variable is `key` in the most layers (found by comparison)."""
    found: dict[tuple[int, str], set[int]] = {}
    for entry in hf.get("lines", []):
        if entry["line"] in lines and entry["identity"] == key:
            found.setdefault((entry["line"], entry["var"]), set()).add(entry["layer"])
    hits = sorted(found, key=lambda k: (-len(found[k]), k))
    return hits[0] if hits else None


def _identities(rows: Sequence[Row], facts: Snapshot, traces: TraceSet) -> str:
    """Per math variable: the nano-vllm line and variable and the HF line and variable that held it, by
    comparison, in the trace whose HF lines are shown; else why none are (the trace that recorded them
    against other bytes, or the default trace that has none)."""
    shown = shown_hf_lines(traces, facts.files)
    view = shown[0] if shown else hf_view(traces) or traces.find()
    assert view is not None   # render_map asks only when there is a fresh-pinned trace
    trace = view.trace
    hf = trace.summary.get("hf_lines") or {}
    head = ("## 按比较找到的等价 · Identities found by comparison\n\n"
            "下面每一行都不是按行号假定的：nano-vllm 的值来自运行轨迹，HF 的值来自同一个行记录器在 HF transformers 的 "
            "Qwen3（eager）上逐行记录，再与 HF 的数学变量逐一比较。max |Δ| 与 ulps 是 nano-vllm 对 HF 的距离，逐层列出。"
            " None of these rows is assumed from line numbers: nano-vllm's values come from the trace, HF's from the same line "
            "recorder run over HF transformers' Qwen3 (eager), each compared with HF's math variables. max |Δ| and ulps "
            "are nano-vllm's distance to HF, per layer.\n\n"
            f"**Trace:** {html.escape(trace.provenance())}\n\n")
    if hf.get("skipped") or not hf.get("lines"):
        why = hf.get("skipped") or "this trace has no HF line records (re-record it with `annotate trace --force`)"
        return head + f"HF 的行没有记录 — HF's lines were not traced: {html.escape(why)}\n"
    hf_file = hf.get("file", "")
    if shown is None:
        return head + ("HF 的行是在另一份字节上记录的 — HF's lines were recorded against other bytes than today's "
                       f"vendored {html.escape(hf_file)}: re-record the trace (`annotate trace --force`)\n")
    nano_lines = _anchored_lines(rows, "nano-vllm", facts)
    hf_lines = _anchored_lines(rows, "transformers", facts).get(hf_file, set())
    out = []
    for key, label in FOLLOWED:
        nano = _nano_hits(trace, nano_lines, key)
        peer = _hf_hit(hf, hf_lines, key)
        if nano is None and peer is None:
            continue
        cells = [f"<td>{html.escape(label)}</td>"]
        if nano:
            path, line, var, per_layer = nano
            cells.append(f'<td><a class="an-map-line" href="{html.escape(page_url(MAP_URI, path, line))}">'
                         f'{html.escape(path.rsplit("/", 1)[-1])}:{line}</a> <code>{html.escape(var)}</code>'
                         f'{_how_compared(trace, path, line, var)}</td>')
            cells.append("<td>" + "; ".join(f"ℓ{layer}: {num(d, 3)} ({num(u, 3)} ulp)" for layer, d, u in per_layer) + "</td>")
        else:
            cells += ["<td>—</td>", "<td>—</td>"]
        if peer:
            line, var = peer
            cells.append(f'<td><a class="an-map-line" href="{html.escape(page_url(MAP_URI, hf_file, line))}">'
                         f'{html.escape(hf_file.rsplit("/", 1)[-1])}:{line}</a> <code>{html.escape(var)}</code></td>')
        else:
            cells.append("<td>—</td>")
        out.append(f'<tr data-math="{html.escape(key)}">{"".join(cells)}</tr>')
    return (head + '<div class="an-table"><table class="an-map-identities"><thead><tr><th>量 quantity</th>'
            "<th>nano-vllm</th><th>逐层 max |Δ| vs HF（按量级的 ulp） per layer (ulps at scale)</th><th>HF transformers</th></tr></thead>"
            f'<tbody>{"".join(out)}</tbody></table></div>\n')


def _intro(facts: Snapshot) -> str:
    pins = [f"{FRAMEWORKS.get(name, name)}: {html.escape(lock.upstream.pin_words)}" for name, lock in facts.pins]
    return ("同一个解码块在三个框架里逐行对照：每格是该步骤的语句（链接到本站源码页的对应行，↗ 是上游固定版本的链接），"
            "以及这一步之后哪个代码变量装着 x、x₁、x₂。HF transformers 是课本写法（层里直接相加，返回 x₂）；"
            "nano-vllm 与 vLLM 用两个变量，把残差加法融合进下一个 RMSNorm。所有行号都在构建时由符号锚点解析得到。\n\n"
            "One decoder block, line by line, in three frameworks: each cell holds the step's statements (linked to the "
            "line on this site's source page; ↗ is the upstream permalink at the pin) and which code variable holds "
            "x, x₁, x₂ after it. HF transformers writes the textbook form (adds inside the layer, returns x₂); "
            "nano-vllm and vLLM use two variables and fuse the residual add into the next RMSNorm. Every line number "
            "is resolved at build time from symbolic anchors.\n\n"
            "固定版本 Pins — " + "; ".join(pins))


def _line(facts: Snapshot, anchor: Anchor) -> int | None:
    """The first line an anchor resolves to in the build's facts (None: it does not resolve)."""
    res = facts.resolution(anchor)
    return res.span[0] if res.ok and res.span else None


def _float32_intro(f32: TraceView | None) -> str:
    """What the cells' float32 lines come from: the float32 trace (named), or why they are unchecked."""
    if f32 is None:
        return f'<p class="an-map-f32-none">{html.escape(NO_TRACE)}</p>'
    return ('<p class="an-map-f32-from">各格的「float32 轨迹」一行由 float32 轨迹生成（按比较找到的等价、同一张量、无匹配），'
            f"不是手写的：{html.escape(f32.label)}（{html.escape(f32.where)}）。 Each cell's \"float32 trace\" line "
            "is generated from the float32 trace (identities found by comparison, same tensors, no match), not "
            "written by hand.</p>")


def _render_cell(cell: MapCell, facts: Snapshot, problems: list[str], f32: TraceView | None = None,
                 f32_line: str = "") -> str:
    """A cell: its statements, what the variables hold after them (for which dtype), what the float32 trace
    found there (``f32_line``, generated, linked to the trace at that line) or, without a float32 trace, the
    cell's hand-written float32 statements marked unchecked; its note."""
    parts = []
    for anchor in cell.anchors:
        resolution = facts.resolution(anchor)
        if not resolution.ok or resolution.span is None:
            problems.append(CheckEntry(resolution).line())
            parts.append(f'<div class="an-ref-broken">{html.escape(anchor.label)}: {html.escape(resolution.describe())}</div>')
            continue
        parts.append(_statement(anchor, resolution, facts))
    if cell.holds:
        scope = "bfloat16 与 float32 皆然 both bfloat16 and float32" if cell.dtype == "both" else "bfloat16"
        parts.append(f'<div class="an-map-holds">之后 after（{scope}）: {_held(cell.holds)}</div>')
    if f32_line:
        parts.append(f'<div class="an-map-holds an-map-f32">float32 轨迹 trace: {f32_line}'
                     f'{_f32_link(cell, facts, f32)}</div>')
    elif cell.float32 and f32 is None:
        parts.append(f'<div class="an-map-holds an-map-f32">float32 下 in float32（未核对 unchecked）: '
                     f'{_held(cell.float32)}</div>')
    if cell.zh:
        parts.append(f'<div class="an-map-note">{html.escape(cell.zh)}'
                     + (f'<br><span lang="en">{html.escape(cell.en)}</span>' if cell.en else "") + "</div>")
    cite = cell_citation(cell, facts)
    if cite:   # annotate.js copies it (data-cite="text"), with the derivation line after it
        parts.append(f'<div class="an-map-cite" data-cite-text="{html.escape(cite).replace(chr(10), "&#10;")}">'
                     '<button type="button" class="an-cite" data-cite="text" title="复制引用 Copy citation" '
                     'aria-label="复制引用 Copy citation">引用 cite</button></div>')
    return "".join(parts) or "—"


def cell_citation(cell: MapCell, facts: Snapshot) -> str:
    """What a map cell's 引用 button copies: lesson and the cell's framework, each statement's file:line and
    symbol with its upstream permalink at the pinned commit, and what the variables hold after it ('' when
    no statement of the cell resolves)."""
    lines = []
    for anchor in cell.anchors:
        res = facts.resolution(anchor)
        if not res.ok or res.span is None:
            continue
        start, end = res.span
        link = facts.files[anchor.path].permalink(start, end)
        lines += [f"位置 where: {anchor.path}:{start}" + (f"-{end}" if end > start else "") + f" · {anchor.symbol}",
                  "上游 upstream: " + (link or "本地独有，无上游链接 local-only: no upstream permalink")]
    if not lines:
        return ""
    owner = facts.files[cell.anchors[0].path].owner
    held = [f"之后 after: {', '.join(f'{v} = {m}' for v, m in cell.holds.items())}"] if cell.holds else []
    return "\n".join([cite_head(owner), *lines, *held])


def _held(holds: dict[str, str]) -> str:
    return ", ".join(f"<code>{html.escape(var)}</code> = {html.escape(math)}" for var, math in holds.items())


def _f32_link(cell: MapCell, facts: Snapshot, f32: TraceView | None) -> str:
    """` — float32 轨迹 trace at L152`: the values panel of the cell's last line (the one its float32 line is
    about) in the float32 trace, at the first layer it ran in; "" without a float32 trace or a record there."""
    if f32 is None or not cell.anchors:
        return ""
    resolution = facts.resolution(cell.anchors[-1])
    if not resolution.ok or resolution.span is None:
        return ""
    path, line = cell.anchors[-1].path, resolution.span[0]
    recs = f32.trace.at(path, line)
    if not recs or not f32.fresh_for(path):
        return ""
    href = value_url(MAP_URI, path, line, recs[0].layer, f32.key)
    return f' — <a class="an-map-f32-link" href="{html.escape(href)}">float32 轨迹 trace, L{line}</a>'


def _statement(anchor: Anchor, resolution: Resolution, facts: Snapshot) -> str:
    start, end = resolution.span  # type: ignore[misc]
    source = facts.source(anchor.path)
    assert source is not None
    first = source.lines[start - 1].strip()
    text = first + (" …" if end > start else "")
    name = anchor.path.rsplit("/", 1)[-1]
    where = f"{name}:{start}" + (f"–{end}" if end > start else "")
    local = page_url(MAP_URI, anchor.path) + page_anchor(start, end)   # a multi-line span: #L260-L269
    permalink = facts.files[anchor.path].permalink(start, end)
    up = (f' <a class="an-upstream" href="{html.escape(permalink)}" title="upstream at the pin">↗</a>'
          if permalink else ' <span class="an-local">(本地独有 local-only)</span>')
    return (f'<div class="an-map-stmt"><a class="an-map-line" href="{html.escape(local)}">{html.escape(where)}</a>'
            f"{up} <code>{wrap_points(html.escape(text))}</code></div>")
