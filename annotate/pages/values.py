"""The values panel: what each traced line produced in the recorded run, beside the line.

A :class:`ValuesPanel` is a :class:`~annotate.pages.extras.LineExtras` provider. After the last
line of every traced statement it places a ``<details class="an-values">`` whose summary names the
math variables the line produced; opened, it shows a trace switch (device / dtype, when ``traces/``
holds more than one), a layer ``<select>`` (every layer of the run), and for each record of that
line in that layer: every tensor the line assigned plus ``hidden_states`` / ``residual`` with shape,
dtype, norm, first values and the math variable it was identified as; fused-vs-eager distances for
eager replays of compiled bodies; aliasing and identity warnings from the trace; the provenance.

Every (trace, layer) view is rendered at build time; ``docs/assets/annotate.js`` only toggles the
``hidden`` attribute, so the panel works offline and from ``file://``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from annotate.pages.trace_set import TraceSet, TraceView
from annotate.pages.tracefmt import esc, identity_text, num, sup_label
from annotate.trace.store import LineRecord, Trace, VarRecord

NONE_KEY = "none"   # the layer key of records outside the decoder layers (Qwen3Model.forward, model.norm)
ROLE_ORDER = {"assigned": 0, "argument": 1, "live": 2, "return": 3}


def layer_key(layer: int | None) -> str:
    return NONE_KEY if layer is None else str(layer)


def layer_name(key: str) -> str:
    return "层外 outside the layers" if key == NONE_KEY else f"第 {key} 层 layer {key}"


@dataclass
class ValuesPanel:
    """Values panels for the source pages of every file the traces recorded."""

    traces: TraceSet
    _ends: dict[str, dict[int, list[int]]] = field(default_factory=dict, repr=False)

    # -- the LineExtras protocol
    def line_html(self, path: str, line: int) -> str:
        """The panels of the statements whose last line is `line` ('' for none)."""
        return "".join(self.panel(path, start) for start in self._statements_ending(path).get(line, []))

    def page_data(self, path: str) -> dict[str, Any]:
        """The traces shown on this page (for scripts): key, label, provenance; the layers."""
        views = self.traces.for_file(path)
        if not views and not self.traces.stale_for(path):
            return {}
        return {"values": {"traces": [{"key": v.key, "label": v.label, "provenance": v.trace.provenance()}
                                      for v in views],
                           "stale": [v.key for v in self.traces.stale_for(path)],
                           "lines": sorted({ln for v in views for ln in v.trace.lines(path)})}}

    def banner_html(self, path: str) -> str:
        """A notice above the code: which traces are shown here, and which are withheld as stale."""
        views, stale = self.traces.for_file(path), self.traces.stale_for(path)
        parts = []
        if views:
            parts.append('<div><b>运行值 Values</b> 点击（或用 Tab 聚焦后按 Enter）带 ▸ 的行，查看该行在记录运行中产生的张量 — '
                         'click (or focus and press Enter) a traced line to see what it produced: '
                         + "; ".join(esc(v.label) for v in views) + "</div>")
        for v in views:   # placed from another pin (annotate/trace/placement.py): say so
            notice = v.file_notice(path)
            if notice:
                parts.append(f'<div class="an-stale"><b>记录于另一版本 Recorded at another pin</b> {esc(notice)}</div>')
        for v in stale:
            parts.append(f'<div class="an-stale"><b>过期 Stale</b> traces/{esc(v.key)} ({esc(v.label)}) was made from '
                         f'other bytes of this file; its values are not shown here, since they could sit on the wrong '
                         f'lines — rerun <code>annotate trace --out traces/{esc(v.key)} --force</code></div>')
        return f'<div class="an-values-banner">{"".join(parts)}</div>' if parts else ""

    # -- one panel
    def panel(self, path: str, start: int) -> str:
        """The collapsed panel of the statement starting at `start`, with every (trace, layer) view."""
        views = [v for v in self.traces.for_file(path) if v.trace.at(path, start)]
        keys = self._layer_keys(views, path, start)
        default_trace, default_layer = views[0].key, self._default_layer(views[0].trace, path, start, keys)
        briefs, bodies = [], []
        for view in views:
            for key in keys:
                hidden = "" if (view.key, key) == (default_trace, default_layer) else " hidden"
                recs = [r for r in view.trace.at(path, start) if layer_key(r.layer) == key]
                attrs = f'data-trace="{esc(view.key)}" data-layer="{key}"{hidden}'
                briefs.append(f'<span class="an-brief" {attrs}>{esc(brief(recs))}</span>')
                bodies.append(f'<div class="an-view" {attrs}>{view_body(view, recs, key)}</div>')
        controls = self._controls(views, keys, default_trace, default_layer)
        return (f'<details class="an-values" id="values-L{start}" data-line="{start}" '
                f'data-trace="{esc(default_trace)}" data-layer="{default_layer}">'
                f'<summary><span class="an-values-tag">L{start} 值 values</span>{"".join(briefs)}</summary>'
                f'<div class="an-values-body">{controls}{"".join(bodies)}</div></details>')

    def _controls(self, views: list[TraceView], keys: list[str], trace: str, layer: str) -> str:
        out = []
        if len(views) > 1:
            opts = "".join(f'<option value="{esc(v.key)}"{" selected" if v.key == trace else ""}>{esc(v.label)}</option>'
                           for v in views)
            out.append(f'<label>运行 trace <select class="an-trace-select">{opts}</select></label>')
        if keys != [NONE_KEY]:
            opts = "".join(f'<option value="{k}"{" selected" if k == layer else ""}>{esc(layer_name(k))}</option>'
                           for k in keys)
            out.append(f'<label>层 layer <select class="an-layer-select">{opts}</select></label>')
        return f'<div class="an-values-controls">{"".join(out)}</div>' if out else ""

    def _layer_keys(self, views: list[TraceView], path: str, start: int) -> list[str]:
        """Every layer of the runs (when the line runs inside the layers), plus `none` when it also runs outside."""
        layered = any(r.layer is not None for v in views for r in v.trace.at(path, start))
        outside = any(r.layer is None for v in views for r in v.trace.at(path, start))
        layers = sorted({n for v in views for n in v.trace.layers()}) if layered else []
        return [str(n) for n in layers] + ([NONE_KEY] if outside else [])

    @staticmethod
    def _default_layer(trace: Trace, path: str, start: int, keys: list[str]) -> str:
        """Layer 1 when the line ran there (the ℓ ≥ 1 path), else the first layer it ran in."""
        ran = [layer_key(r.layer) for r in trace.at(path, start)]
        return next((k for k in keys if k in ran and k not in ("0", NONE_KEY)), next(k for k in keys if k in ran))

    def _statements_ending(self, path: str) -> dict[int, list[int]]:
        """Last line of each traced statement -> its first line(s), so a panel never splits a statement."""
        if path not in self._ends:
            ends: dict[int, list[int]] = {}
            for start in sorted({ln for v in self.traces.for_file(path) for ln in v.trace.lines(path)}):
                end = max(_end_line(v.trace, r) for v in self.traces.for_file(path) for r in v.trace.at(path, start))
                ends.setdefault(max(end, start), []).append(start)
            self._ends[path] = ends
        return self._ends[path]


def _end_line(trace: Trace, rec: LineRecord) -> int:
    """Last line of a record's statement; for a function entry, the line before its first statement
    (the end of a multi-line signature)."""
    if rec.kind != "entry":
        return rec.end_line
    info = trace.function(rec.function) or {}
    first = min((s["line"] for s in info.get("statements", [])), default=rec.line + 1)
    return max(rec.line, first - 1)


# ---------------------------------------------------------------- the parts of one view

def brief(recs: list[LineRecord]) -> str:
    """The summary line: what the line's assigned (else live) tensors equal, in the first record."""
    if not recs:
        return "未执行 not run"
    shown = [v for v in recs[0].vars if v.role == "assigned"] or [v for v in recs[0].vars if v.role != "return"]
    parts = [f"{v.name} ≡ {sup_label(v.label)}" if v.identity.get("status") == "match" else
             f"{v.name}: {v.label}" if v.identity.get("status") == "no match" else v.name for v in shown]
    more = f" · {len(recs)} calls 次" if len(recs) > 1 else ""
    return (" · ".join(parts) or "—") + more


def view_body(view: TraceView, recs: list[LineRecord], key: str) -> str:
    """Every record of the line in one layer of one trace, then the provenance line."""
    if not recs:
        body = (f'<p class="an-none">这一行在{esc(layer_name(key))}没有执行（另一分支） — '
                f'not executed in {"this run outside the layers" if key == NONE_KEY else f"layer {key}"} '
                f'(the other branch ran)</p>')
    else:
        body = "".join(record_html(view.trace, r, len(recs) > 1) for r in recs)
    return body + f'<p class="an-prov">{esc(view.trace.provenance())}</p>'


def record_html(trace: Trace, rec: LineRecord, several: bool) -> str:
    """One execution of the line: where (module, replay or not, call/hit), its tensors, its warnings."""
    tags = [f"<code>{esc(rec.module or rec.function)}</code>"]
    if rec.source == "replay":
        tags.append('<span class="an-tag" title="the compiled function ran compiled; this is its original body '
                    'replayed eagerly on cloned inputs">eager replay 重放</span>')
    if rec.kind == "entry":
        tags.append('<span class="an-tag">entry 入口参数</span>')
    if several:
        tags.append(f"<span>call {rec.call} · pass {rec.hit + 1}</span>")
    head = f'<div class="an-rec-head">{" ".join(tags)}</div>'
    vars_html = "".join(var_html(v, unchanged_html(trace, rec, v)) for v in shown_vars(rec))
    return (f'<div class="an-rec" data-record="{rec.id}">{head}{vars_html}'
            f'{fused_html(trace, rec)}{warnings_html(trace, rec)}</div>')


def shown_vars(rec: LineRecord) -> list[VarRecord]:
    """Assigned first, then arguments, live, returns; a return that is literally a shown variable is folded in."""
    names = {v.name for v in rec.vars if not v.name.startswith("return")}
    keep = [v for v in rec.vars if not (v.role == "return" and names & set(v.same_memory))]
    return sorted(keep, key=lambda v: ROLE_ORDER.get(v.role, 9))


def unchanged_html(trace: Trace, rec: LineRecord, v: VarRecord) -> str:
    """Where an earlier record holds the very same copy: the value is proved unchanged since then."""
    same = v.same_copy_as
    if not same or same.get("record") == rec.id or not 0 <= same.get("record", -1) < len(trace.records):
        return ""
    first = trace.record(same["record"])
    title = ("the recorder reused the copy it took there: no code that could write to this tensor ran "
             "in between (proved from the code, not found by comparing values)")
    if (first.function, first.module, first.call) == (rec.function, rec.module, rec.call):
        text = f"自 L{first.line} 起未变 unchanged since L{first.line}"
    else:
        where = first.module or first.function
        text = f"= <code>{esc(same.get('var', ''))}</code> @ {esc(where)} L{first.line}（同一份拷贝 same copy）"
    return f'<span class="an-same" title="{esc(title)}">{text}</span>'


def var_html(v: VarRecord, unchanged: str = "") -> str:
    """One tensor: name ≡ math (distance); shape, dtype, norm, mean, absmax, first values."""
    m = v.matched
    data = f' data-key="{esc(m["key"])}" data-layer="{m["layer"]}"' if m and v.identity.get("status") == "match" else ""
    ret = [n for n in v.same_memory if n.startswith("return")]
    role = v.role + (" · returned" if ret else "")
    status = v.identity.get("status", "no candidate").replace(" ", "-")
    head = (f'<div class="an-var-head"><code class="an-var-name">{esc(v.name)}</code>'
            f'<span class="an-role">{esc(role)}</span>'
            f'<span class="an-id an-{status}"{data}>≡ {esc(identity_text(v.identity))}</span>{unchanged}</div>')
    first = ", ".join(num(x, 4) for x in v.head)
    stats = (f'<div class="an-stats"><span>{esc(list(v.shape))} {esc(v.dtype)}</span>'
             f'<span>‖·‖₂ = {num(v.norm)}</span><span>mean {num(v.mean, 3)}</span>'
             f'<span>max |·| {num(v.absmax)}</span><span class="an-head">[{esc(first)}, …]</span></div>')
    return f'<div class="an-var" data-var="{esc(v.name)}" data-role="{esc(v.role)}">{head}{stats}</div>'


def fused_html(trace: Trace, rec: LineRecord) -> str:
    """For an eager replay: how far the compiled call's outputs are from this replay's (ulps)."""
    if rec.source != "replay":
        return ""
    checks = [c for c in trace.checks_for(rec.function) if c.get("module") == rec.module and c.get("call") == rec.call]
    if not checks:
        return ""
    parts = []
    for out in checks[0]["outputs"]:
        same = "bit-exact" if not out["max_ulps"] else (f"max {num(out['max_ulps'])} ulp, "
                                                        f"{num(out['n_diff'])} / {num(out['numel'])} elements differ")
        parts.append(f"<code>{esc(out['name'])}</code> {same}")
    return (f'<div class="an-fused"><b>编译版 vs 重放 fused vs eager</b> the compiled call\'s outputs against this '
            f'replay of its body: {"; ".join(parts)}</div>')


def warnings_html(trace: Trace, rec: LineRecord) -> str:
    """Hazards for this record: the trace's flags, and alias groups of distinct names it did not flag."""
    msgs = [f["message"] for f in trace.flags if rec.id in f.get("records", [])]
    flagged = {n for f in trace.flags if f.get("kind") == "aliasing" and rec.id in f.get("records", [])
               for n in f.get("names", [])}
    for group in rec.aliases:
        names = [n for n in group.get("names", []) if not n.startswith("return")]
        if len(names) > 1 and not set(names) <= flagged:
            how = "the same tensor" if len(group.get("same", [])) > 1 else "views of one storage"
            msgs.append(f"{' and '.join(names)} are {how}: an in-place update of one changes the other")
    return "".join(f'<div class="an-warn" role="note">⚠ {esc(m)}</div>' for m in msgs)
