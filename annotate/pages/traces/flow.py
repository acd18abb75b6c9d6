"""The two-variable flow diagram, generated from a trace as an inline SVG at build time.

Two consecutive decoder layers (the last two of the run, so ``Qwen3Model.norm`` follows them) drawn
top to bottom: ``hidden_states`` runs down the left lane, ``residual`` down the right one, each labelled
between the two lanes so that the whole diagram fits a phone's width. Every
statement of ``Qwen3DecoderLayer.forward`` / ``Qwen3Model.forward`` that assigned one of them is a
box; below it, each edge it produced is labelled with the code variable, the math variable the trace
*identified* it as (``summary.flow`` + the record's roles — nothing is assumed from line numbers),
and the source line, linked to the source page's anchor.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import AbstractSet, Callable

from annotate.pages.base.tracefmt import esc, sup_label
from annotate.trace.format.store import FLOW_FUNCTIONS, Trace

LANES = ("hidden_states", "residual")
LANE_OF = {"hidden_states": 0, "residual": 1, "_": 1}
_CALL = re.compile(r"self\.(\w+)\((.*)\)")

# geometry (px): lane x positions, box spans, row heights. Narrow enough for a phone (390 px, ~358 px of
# text column) at its own size: the lanes run down the two edges and each lane's label sits between them,
# hidden_states' above residual's, so neither lane starts off-screen and no text shrinks below 11 px
WIDTH, X = 356, (8, 348)
BOX_H, GAP, TOP = 34, 92, 54
#: where an edge's two text lines sit below the arrow's start, per lane (label, then its source line)
LABEL_Y = ((18, 33), (56, 71))


@dataclass
class Edge:
    """A value leaving a step on one lane: code variable, identified math label, producing line."""

    var: str
    math: str
    line: int
    file: str
    layer: int | None = None      # the layer whose values panel the edge's link opens


@dataclass
class Step:
    """One statement that assigned a flow variable."""

    line: int
    file: str
    layer: int | None
    op: str                       # `input_layernorm(hidden_states, residual)`
    lanes: tuple[int, ...]        # lanes it reads/writes
    out: dict[int, Edge] = field(default_factory=dict)


@dataclass
class Flow:
    """The diagram's content: the values on entry to the first shown layer, then the steps."""

    layers: list[int]
    entry: dict[int, Edge]
    steps: list[Step]


def _assigned(trace: Trace, record_id: int) -> set[str]:
    return {v.name for v in trace.record(record_id).vars if v.role == "assigned"}


def _label(held: dict, name: str) -> str:
    h = held.get(name) or {}
    return sup_label(h.get("label") or "no match")


def extract(trace: Trace) -> Flow:
    """Steps of the last two layers and the final norm, from the trace's `summary.flow`.

    A statement that only hands the same values on (the loop's `layer(...)` call receiving what the
    layer returned) is not a step: an edge is drawn where a variable's identified value changes.
    """
    layers = trace.layers()[-2:]
    current: dict[str, Edge] = {}
    entry: dict[int, Edge] = {}
    steps: list[Step] = []
    for f in (f for f in trace.summary.get("flow", []) if f.get("function") in FLOW_FUNCTIONS):
        shown = f["layer"] is None and bool(entry) or f["layer"] in layers
        if shown and not entry:
            entry = {LANE_OF[n]: current[n] for n in LANES if n in current}
        changed = {}
        for name in sorted(_assigned(trace, f["record"]) & set(LANE_OF)):
            edge = Edge(name, _label(f["held"], name), f["line"], f["file"], f["layer"])
            if name not in current or current[name].math != edge.math:
                changed[name] = edge
            current[name] = edge if name in changed else current[name]
        if shown and changed:
            steps.append(_step(f, changed))
    return Flow(layers, entry, steps)


def _step(f: dict, changed: dict[str, Edge]) -> Step:
    """A box for flow entry `f` that produced the edges `changed`."""
    m = _CALL.search(f["text"])
    op = f"{m.group(1)}({m.group(2)})" if m else f["text"]
    reads = {LANE_OF[n] for n in LANES if m and re.search(rf"\b{n}\b", m.group(2))}
    lanes = tuple(sorted(reads | {LANE_OF[n] for n in changed}))
    return Step(f["line"], f["file"], f["layer"], op, lanes, {LANE_OF[n]: e for n, e in changed.items()})


def render_svg(flow: Flow, href: Callable[[str, int, int | None], str]) -> str:
    """The diagram as inline SVG; `href(file, line, layer)` gives the link of a source line's values in that layer."""
    rows = [_title(flow)]
    y = TOP
    rows += _edges(flow.entry, y, href, "entry")
    y += GAP
    for step in flow.steps:
        rows.append(_box(step, y, href))
        y += BOX_H
        rows += _edges(step.out, y, href, "out", passthrough={0, 1} - set(step.out))
        y += GAP
    height = y + 10
    body = "".join(rows)
    return (f'<svg class="an-flow" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height}" '
            f'width="{WIDTH}" height="{height}" role="img" font-family="system-ui, sans-serif" font-size="13" '
            f'aria-label="hidden_states / residual flow through layers {flow.layers[0]}–{flow.layers[-1]} and the final norm">'
            f'<defs><marker id="an-arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
            f'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="currentColor"/></marker></defs>'
            f'{body}</svg>')


COLORS = ("#1e88e5", "#ef6c00")


def _title(flow: Flow) -> str:
    return (f'<text x="{X[0]}" y="20" font-weight="700" fill="{COLORS[0]}">hidden_states</text>'
            f'<text x="{X[1]}" y="20" text-anchor="end" font-weight="700" fill="{COLORS[1]}">residual</text>'
            f'<text x="{WIDTH / 2}" y="40" text-anchor="middle" font-size="11" fill="currentColor" opacity="0.7">'
            f'layers {flow.layers[0]}–{flow.layers[-1]} → Qwen3Model.norm</text>')


def _edges(out: dict[int, Edge], y: float, href: Callable[[str, int, int | None], str], kind: str,
           passthrough: AbstractSet[int] = frozenset()) -> list[str]:
    """Arrows down each lane from y to y+GAP; labelled when the step produced that value."""
    parts = []
    for lane in (0, 1):
        x = X[lane]
        edge = out.get(lane)
        dash = '' if edge else ' stroke-dasharray="4 4" opacity="0.6"'
        if edge is None and lane not in passthrough:
            continue
        parts.append(f'<line x1="{x}" y1="{y}" x2="{x}" y2="{y + GAP}" stroke="{COLORS[lane]}" stroke-width="2.5" '
                     f'marker-end="url(#an-arrow)"{dash}/>')
        if edge is None:
            continue
        tx, anchor = (x + 10, "start") if lane == 0 else (x - 10, "end")   # inwards, between the lanes
        top, low = (y + dy for dy in LABEL_Y[lane])
        link = href(edge.file, edge.line, edge.layer)
        parts.append(f'<g class="an-edge" data-var="{esc(edge.var)}" data-line="{edge.line}">'
                     f'<text x="{tx}" y="{top}" text-anchor="{anchor}" fill="currentColor">'
                     f'<tspan font-family="ui-monospace, monospace" fill="{COLORS[lane]}">{esc(_name(edge.var))}</tspan>'
                     f' ≡ <tspan font-weight="700">{esc(edge.math)}</tspan></text>'
                     f'<a href="{esc(link)}"><text x="{tx}" y="{low}" text-anchor="{anchor}" font-size="11" '
                     f'fill="currentColor" text-decoration="underline">{esc(_short(edge.file))}:{edge.line}</text></a></g>')
    return parts


def _box(step: Step, y: float, href: Callable[[str, int, int | None], str]) -> str:
    """A statement: spans both lanes when it reads or writes both, else sits on the hidden_states lane."""
    both = len(step.lanes) > 1
    x0, x1 = (X[0] - 6, X[1] + 6) if both else (X[0] - 6, X[1] - 14)   # one lane: residual's bypass stays clear
    where = "Qwen3Model" if step.layer is None else f"layer {step.layer}"
    bypass = ("" if both else f'<line x1="{X[1]}" y1="{y}" x2="{X[1]}" y2="{y + BOX_H}" stroke="{COLORS[1]}" '
              f'stroke-width="2.5" stroke-dasharray="4 4" opacity="0.6"/>')
    return bypass + (f'<a href="{esc(href(step.file, step.line, step.layer))}"><g class="an-step" data-line="{step.line}">'
            f'<rect x="{x0}" y="{y}" width="{x1 - x0}" height="{BOX_H}" rx="5" fill="currentColor" fill-opacity="0.06" '
            f'stroke="currentColor" stroke-opacity="0.5"/>'
            f'<text x="{(x0 + x1) / 2}" y="{y + 14}" text-anchor="middle" font-size="11" fill="currentColor" '
            f'opacity="0.75">{esc(where)} · L{step.line}</text>'
            f'<text x="{(x0 + x1) / 2}" y="{y + 28}" text-anchor="middle" font-family="ui-monospace, monospace" '
            f'font-size="11" fill="currentColor">{esc(step.op)}</text></g></a>')


def _name(var: str) -> str:
    """`_` is easy to miss: say that the value is discarded."""
    return "_ (discarded 丢弃)" if var == "_" else var


def _short(file: str) -> str:
    return file.rsplit("/", 1)[-1]
