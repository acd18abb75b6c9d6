"""The values panel: what each traced line produced in the recorded run, beside the line.

A :class:`ValuesPanel` is a :class:`~annotate.pages.extras.LineExtras` provider. After the last
line of every traced statement it places a ``<details class="an-values">`` whose summary names the
math variables the line produced (default trace and layer); opened, it shows a layer ``<select>``
(every layer of the run), a legend of ≡ with a link to docs/values.md, and the view of that
(trace, layer): every tensor the line assigned plus ``hidden_states`` / ``residual`` with shape,
dtype, norm, first values and the math variable it was identified as — in words for the lesson's
variables, labelled 中间量 for intermediates, with the reason where it matches none; fused-vs-eager
distances for eager replays of compiled bodies; aliasing warnings; the provenance.

Weight independent of depth: the page holds only the collapsed panels. The views of one trace are
a generated script next to the page (``qwen3.py.values-cpu.js``, see :meth:`ValuesPanel.data_files`)
that ``docs/assets/annotate.js`` loads with a ``<script>`` element the first time a panel opens —
so it works from ``file://`` (no fetch) and a 28-layer trace weighs on that file, not on the page.
The trace choice is page-wide: one switch in the banner (``banner_html``).
"""
from __future__ import annotations

import json
import posixpath
import re
from dataclasses import dataclass, field
from typing import Any

from annotate.links import SOURCE_DIR, page_src_uri, relative
from annotate.pages.tp_page import slice_html, split_key
from annotate.pages.trace_set import TraceSet, TraceView
from annotate.pages.tracefmt import (NONE_KEY, ROLE_WORDS, ambiguous_text, esc, identity_text, layer_key,
                                     layer_name, margin_text, math_words, num, sup_label)
from annotate.trace.schema import LineRecord, VarRecord
from annotate.trace.store import Trace

ROLE_ORDER = {"assigned": 0, "argument": 1, "live": 2, "return": 3}
LESSON_VARS = ("hidden_states", "residual")   # the two variables the lesson follows; others are intermediates
VALUES_DOC = "values.md"
GLOSSARY_DOC = "reference/glossary.md"


def script_uri(path: str, trace_key: str) -> str:
    """Docs-relative URI of the script holding the views of `trace_key` for vendored file `path`."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", trace_key)
    return f"{SOURCE_DIR}/{path}.values-{safe}.js"


def compare_anchor(path: str, line: int) -> str:
    """The id an experiment page gives the first row of vendored ``path``'s baseline line ``line``."""
    return "cmp-" + re.sub(r"[^A-Za-z0-9_-]", "_", path) + f"-L{line}"


def doc_href(path: str, doc: str) -> str:
    """A built-page URL from the source page of `path` to a hand-written page (raw HTML, not Markdown)."""
    return relative(page_src_uri(path), doc.removesuffix(".md") + ".html")


@dataclass
class ValuesPanel:
    """Values panels for the source pages of every file the traces recorded."""

    traces: TraceSet
    #: vendored file -> (experiment page URI, title) of the experiments that edit it: each panel of its
    #: page links "对照实验 compare with experiment" to them (annotate/pages/experiment_page.py)
    experiments: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    _ends: dict[str, dict[int, list[int]]] = field(default_factory=dict, repr=False)

    # -- the LineExtras protocol
    def line_html(self, path: str, line: int) -> str:
        """The panels of the statements whose last line is `line` ('' for none)."""
        return "".join(self.panel(path, start) for start in self._statements_ending(path).get(line, []))

    def page_data(self, path: str) -> dict[str, Any]:
        """The traces shown on this page (for scripts): key, label, provenance, script; the lines."""
        views = self.traces.for_file(path)
        if not views and not self.traces.stale_for(path):
            return {}
        return {"values": {"traces": [{"key": v.key, "label": v.label, "provenance": v.trace.provenance(),
                                       "src": posixpath.basename(script_uri(path, v.key))} for v in views],
                           "stale": [v.key for v in self.traces.stale_for(path)],
                           "lines": sorted({ln for v in views for ln in v.trace.lines(path)}),
                           "layers": sorted({n for v in views for n in v.trace.layers()})}}

    def data_files(self, path: str) -> dict[str, str]:
        """One script per trace shown on this page: every (line, layer) view, brief and citation of it."""
        out = {}
        views = self.traces.for_file(path)
        layer_keys: dict[int, list[str]] = {}   # start -> its layer keys: they depend on the page's traces, not on one
        for view in views:
            data: dict[str, dict[str, dict[str, str]]] = {}
            for start in sorted(view.trace.lines(path)):
                if start not in layer_keys:
                    layer_keys[start] = self._layer_keys(views, path, start)
                keys = layer_keys[start]
                ranked = [f"{k}@{r}" if r else k for r in range(view.trace.tp) for k in keys]
                data[str(start)] = {k: {"b": brief(view.trace, recs), "h": view_body(view, recs, k)}
                                    for k in ranked for recs in [self.records(view, path, start, k)]}
            text = json.dumps(data, ensure_ascii=False, sort_keys=True).replace("</", "<\\/")
            out[script_uri(path, view.key)] = (f"/* values of {esc(path)} in {esc(view.where)}, generated by annotate */\n"
                                               f"(window.anValues = window.anValues || {{}})[{json.dumps(view.key)}] = {text};\n")
        return out

    def banner_html(self, path: str) -> str:
        """A notice above the code: which traces are shown (the page-wide switch), and which are stale."""
        return trace_banner(path, self.traces.for_file(path), self.traces.stale_for(path))

    # -- one panel
    def records(self, view: TraceView, path: str, start: int, key: str) -> list[LineRecord]:
        """The records of the statement at `start` in one layer, named by its key (``none``: outside the
        layers; ``2@1``: layer 2 on rank 1 of a --tp trace)."""
        layer, rank = split_key(key)
        want = None if layer == NONE_KEY else int(layer)
        return [r for r in view.trace.rank_at(rank, path, start) if r.layer == want]

    def panel(self, path: str, start: int) -> str:
        """The collapsed panel of the statement starting at `start`: default brief, layer switch, legend, a slot."""
        views = [v for v in self.traces.for_file(path) if v.trace.at(path, start)]
        keys = self._layer_keys(views, path, start)
        trace, layer = views[0].key, self._default_layer(views[0].trace, path, start, keys)
        summary = brief(views[0].trace, self.records(views[0], path, start, layer))
        controls = self.controls_html(keys, layer, max(v.trace.tp for v in views))
        return (f'<details class="an-values" id="values-L{start}" data-line="{start}" '
                f'data-trace="{esc(trace)}" data-layer="{layer}">'
                f'<summary><span class="an-values-tag">L{start} 值 values</span>'
                f'<span class="an-brief">{esc(summary)}</span></summary>'
                f'<div class="an-values-body">{controls}{self._compare(path, start)}</div></details>')

    def _compare(self, path: str, start: int) -> str:
        """Links to the experiments that edit this file, at this line's rows ('' when none does)."""
        links = [f'<a class="an-compare" href="{esc(relative(page_src_uri(path), uri.removesuffix(".md") + ".html"))}'
                 f'#{esc(compare_anchor(path, start))}">{esc(title)}</a>' for uri, title in self.experiments.get(path, [])]
        return f'<p class="an-compare-line">对照实验 compare with experiment: {" · ".join(links)}</p>' if links else ""

    @staticmethod
    def panel_template(path: str) -> str:
        """What every open panel shows under its layer switch, once per page (annotate.js copies it in):
        the legend of ≡ and ulp, the links to docs/values.md and the glossary, the citation button."""
        return ('<template id="an-panel-template"><p class="an-legend"><b>≡</b> 表示“在容差内等于 HF transformers '
                '参照实现里的这个张量” — ≡ means “equals this tensor of the HF transformers reference (peer), within '
                'tolerance”; <b>ulp</b> 是该数值附近相邻两个浮点数的间距 — the spacing of floats near the value. '
                f'<a href="{esc(doc_href(path, VALUES_DOC))}">怎么读 How to read this</a> · '
                f'<a href="{esc(doc_href(path, GLOSSARY_DOC))}#trace-terms">术语 Glossary</a></p>'
                '<div class="an-values-tools"><button type="button" class="an-cite" data-cite="line">'
                '复制引用 Copy citation</button></div>'
                '<div class="an-view" aria-live="polite"><p class="an-none">加载中… loading…</p></div></template>')

    @staticmethod
    def controls_html(keys: list[str], layer: str, tp: int = 1) -> str:
        """The layer switch, and the rank switch when a trace of the page ran on several ranks. The
        layer switch names only the shown layer; annotate.js adds the others from the page data
        (`layers`, `outside`) and the ranks from `data-ranks`, so 28 layers do not weigh 28 options
        on every panel."""
        ranks = ""
        if tp > 1:   # its options come from annotate.js (data-ranks): the page's weight stays one option per panel
            ranks = (f'<label>并行 rank <select class="an-rank-select" data-ranks="{tp}" '
                     'aria-label="张量并行 rank tensor-parallel rank"></select></label>')
        if keys == [NONE_KEY]:
            return f'<div class="an-values-controls">{ranks}</div>' if ranks else ""
        outside = ' data-outside="1"' if NONE_KEY in keys else ""
        return (f'<div class="an-values-controls"><label>层 layer <select class="an-layer-select"{outside}>'
                f'<option value="{layer}" selected>{esc(layer_name(layer))}</option></select>'
                f'</label>{ranks}</div>')

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


def trace_banner(path: str, views: list[TraceView], stale: list[TraceView]) -> str:
    """A notice above the code of `path`'s page: which traces are shown (the page-wide switch), which are
    stale; then the panels' template. nano-vllm's pages and HF's (annotate/pages/hf_values.py) share it."""
    parts = []
    if views:
        how = (f'<a href="{esc(doc_href(path, VALUES_DOC))}">怎么读 How to read the values</a>')
        parts.append('<div><b>运行值 Values</b> 点击带 ▸ 的行，或用 Tab 聚焦它下面的“值 values”后按 Enter，'
                     '查看该行在记录运行中产生的张量'
                     '（Esc 关闭）— click a line marked ▸, or Tab to the “values” line under it and press Enter, to see '
                     f'what it produced in the recorded run (Esc closes). {how}</div>')
        if len(views) > 1:
            opts = "".join(f'<option value="{esc(v.key)}">{esc(v.label)}</option>' for v in views)
            parts.append(f'<div class="an-page-trace"><label><b>运行（全页）Trace, whole page</b> '
                         f'<select class="an-trace-select" aria-label="运行 trace (整页 whole page)">{opts}</select></label> '
                         '<span class="an-hint">本页所有面板一起切换，浏览器会记住 — switches every panel of the page; '
                         'remembered by the browser</span></div>')
        else:
            parts.append(f'<div class="an-page-trace">运行 Trace: {esc(views[0].label)}</div>')
    for v in views:   # placed from another pin (annotate/trace/placement.py): say so
        notice = v.file_notice(path)
        if notice:
            parts.append(f'<div class="an-stale"><b>记录于另一版本 Recorded at another pin</b> {esc(notice)}</div>')
    for v in stale:
        parts.append(f'<div class="an-stale"><b>过期 Stale</b> {esc(v.where)}（{esc(v.label)}）录制时本文件的字节与现在不同，'
                     '它的值可能落在错误的行上，所以这里不显示；重新录制：'
                     f'<code>annotate trace --out {esc(v.where)} --force</code>'
                     f' — it was made from other bytes of this file; its values are not shown here, since they '
                     f'could sit on the wrong lines: rerun the command above.</div>')
    template = ValuesPanel.panel_template(path) if views else ""
    return f'<div class="an-values-banner">{"".join(parts)}</div>{template}' if parts else ""


def _end_line(trace: Trace, rec: LineRecord) -> int:
    """Last line of a record's statement; for a function entry, the line before its first statement
    (the end of a multi-line signature)."""
    if rec.kind != "entry":
        return rec.end_line
    info = trace.function(rec.function) or {}
    first = min((s["line"] for s in info.get("statements", [])), default=rec.line + 1)
    return max(rec.line, first - 1)


# ---------------------------------------------------------------- the parts of one view

def brief(trace: Trace, recs: list[LineRecord]) -> str:
    """The summary line: what the line's assigned (else live) tensors equal, in the first record of
    `trace`; a tensor with no ≡ is named as the opened panel names it (:func:`kind_words`)."""
    if not recs:
        return "未执行 not run"
    shown = [v for v in recs[0].vars if v.role == "assigned"] or [v for v in recs[0].vars if v.role != "return"]
    parts = [f"{v.name} ≡ {sup_label(v.label)}" if v.identity.get("status") == "match" else
             f"{v.name}: {kind_words(recs[0], v, trace)[0]}" if v.identity.get("status") == "no match" else
             f"{v.name}: {ambiguous_text(v.identity)[0]}" if v.identity.get("status") == "ambiguous" else v.name
             for v in shown]
    more = f" · {len(recs)} 次调用 calls" if len(recs) > 1 else ""
    return (" · ".join(parts) or "—") + more


def view_body(view: TraceView, recs: list[LineRecord], key: str) -> str:
    """Every record of the line in one layer (on one rank) of one trace, then the provenance line."""
    key, rank = split_key(key)
    if not recs:
        body = (f'<p class="an-none">这一行在{esc(layer_name(key))}没有执行（走了另一分支） — '
                f'not executed in {"this run outside the layers" if key == NONE_KEY else f"layer {key}"} '
                f'(the other branch ran)</p>')
    else:
        body = "".join(record_html(view, r, call_varies(recs), key, rank) for r in recs)
    return body + f'<p class="an-prov">来源 Provenance: {esc(view.trace.provenance())}</p>'


def call_varies(recs: list[LineRecord]) -> tuple[bool, bool]:
    """Whether the records of one panel differ in their call, and in their pass (hit): a count that is
    the same in every record tells the reader nothing, so the panel shows only the one that varies."""
    return len({r.call for r in recs}) > 1, len({r.hit for r in recs}) > 1


def record_html(view: TraceView, rec: LineRecord, varies: tuple[bool, bool], key: str, rank: int = 0) -> str:
    """One execution of the line: where (module, replay or not, call/hit), its tensors, its warnings.
    On a rank other than 0 of a --tp trace, its slices; the trace's cross-record facts (same copy,
    fused vs eager, aliasing flags) were worked out on rank 0 only, so they are not shown there."""
    trace = view.trace
    tags = [f'<code title="模块 module">{esc(rec.module or rec.function)}</code>']
    if rec.source == "replay":
        tags.append('<span class="an-tag" title="编译函数以编译版运行；这里是它的原函数体在克隆的输入上逐行重放 — the '
                    'compiled function ran compiled; this is its original body replayed eagerly on cloned inputs">'
                    'eager 重放 replay</span>')
    if rec.kind == "entry":
        tags.append('<span class="an-tag">入口参数 entry</span>')
    counts = ([f"第 {rec.call + 1} 次调用 call {rec.call + 1}"] if varies[0] else []) + \
        ([f"第 {rec.hit + 1} 遍 pass {rec.hit + 1}"] if varies[1] else [])
    if counts:
        tags.append(f"<span>{' · '.join(counts)}</span>")
    head = f'<div class="an-rec-head">{" ".join(tags)}</div>'
    on_rank = f" · rank {rank} / {trace.tp}" if trace.tp > 1 else ""
    where = f"{layer_name(key)}{on_rank} · 运行 trace {view.label} ({view.where})"
    vars_html = "".join(var_html(v, unchanged_html(trace, rec, v) if rank == 0 else "", rec, trace, where)
                        + slice_html(trace, rank, rec, v) for v in shown_vars(rec))
    extra = f"{fused_html(trace, rec)}{warnings_html(trace, rec)}" if rank == 0 else ""
    on = f' data-rank="{rank}"' if trace.tp > 1 else ""
    return f'<div class="an-rec" data-record="{rec.id}"{on}>{head}{vars_html}{extra}</div>'


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
    title = ("记录器沿用了那里拍下的拷贝：其间运行的代码不可能写这个张量（由代码推出，不是比较数值）— "
             "the recorder reused the copy it took there: no code that could write to this tensor ran "
             "in between (proved from the code, not found by comparing values)")
    if (first.function, first.module, first.call) == (rec.function, rec.module, rec.call):
        text = f"自 L{first.line} 起未变 unchanged since L{first.line}"
    else:
        text = same_copy_text(first, str(same.get("var", "")))
    return f'<span class="an-same" title="{esc(title)}">{text}</span>'


def same_copy_text(first: LineRecord, var: str) -> str:
    """The visible words for a copy first taken in another function: its file and line (a bare ``L50``
    would read as this page's line), which value (``return[0]`` is the first return value), and why it
    is the same copy (a tooltip alone is out of reach on a touch screen)."""
    at = f"{first.file.rsplit('/', 1)[-1]}:{first.line}"
    where = esc(first.module or first.function)
    nth = var[len("return["):-1] if var.startswith("return[") and var.endswith("]") else ""
    what_zh = f"第 {int(nth) + 1} 个返回值 " if nth.isdigit() else ""
    what_en = f" (return value {int(nth) + 1})" if nth.isdigit() else ""
    return (f"同一份拷贝：就是 {esc(at)}（{where}）的 {what_zh}<code>{esc(var)}</code>，记录器沿用了那里拍下的拷贝，"
            f"其间运行的代码不可能改写它 — the same copy as <code>{esc(var)}</code>{what_en} at {esc(at)} ({where}): "
            f"the recorder reused the copy it took there, since no code in between could write to it")


def _aliased(trace: Trace, rec: LineRecord, name: str) -> bool:
    """Whether the trace flagged `name` in this record as sharing memory with another variable."""
    return any(f.get("kind") == "aliasing" and rec.id in f.get("records", []) and name in f.get("names", [])
               for f in trace.flags)


def kind_words(rec: LineRecord, v: VarRecord, trace: Trace) -> tuple[str, str]:
    """(short label, explanation) of a tensor that matched no math variable: intermediate, aliasing, or beyond tolerance."""
    near = v.identity.get("nearest")
    near_text = (f"最接近 nearest {sup_label(near['label'])}，相对差 rel {num(near.get('rel'), 2)}"
                 f"（容差 tolerance {num(v.identity.get('tolerance'), 2)}）" if near else "")
    if _aliased(trace, rec, v.name):
        return ("无匹配：别名 no match: aliasing",
                "这个张量与另一个变量共用内存（float32 下 .float() 不复制），原地归一化改写了它，于是它不再等于任何数学变量 — "
                "it shares memory with another variable (in float32 .float() returns the same tensor), an in-place "
                "update overwrote it, so it equals no math variable. " + near_text)
    if v.name not in LESSON_VARS and not v.name.startswith("return"):
        return ("中间量 intermediate",
                "这一步的中间结果，不是课上追踪的数学变量，所以没有 ≡ — a value inside this step, not one of the "
                "lesson's math variables, so it has no ≡. " + near_text)
    return ("无匹配 no match",
            "与 HF 的每个候选张量都相差超过容差 — farther than the tolerance from every candidate of the peer. " + near_text)


def cite_text(v: VarRecord, where: str) -> str:
    """The tensor part of a citation: code name, math variable, layer, trace, shape, dtype, norm, first values."""
    m = v.identity.get("status") == "match" and v.matched
    ident = f"≡ {sup_label(v.label)}（{math_words(m['key'])}）" if m else "≡ —"
    return (f"张量 tensor: {v.name} {ident}\n位置 where: {where}\n"
            f"形状 shape: {list(v.shape)} {v.dtype} · ‖·‖₂ = {num(v.norm)} · max |·| = {num(v.absmax)}\n"
            f"前几个值 first values: [{', '.join(num(x, 4) for x in v.head)}, …]")


def var_html(v: VarRecord, unchanged: str, rec: LineRecord, trace: Trace, where: str) -> str:
    """One tensor: name, role, ≡ math variable in words (or why none); shape, dtype, norm, first values."""
    m = v.matched
    status = v.identity.get("status", "no candidate")
    data = f' data-key="{esc(m["key"])}" data-layer="{m["layer"]}"' if m and status == "match" else ""
    key = m["key"] if m else ""
    ret = [n for n in v.same_memory if n.startswith("return")]
    role = ROLE_WORDS.get(v.role, v.role) + (" · 也被返回 returned" if ret else "")
    if status == "match":
        margin = margin_text(v.identity)
        ident = (f'<span class="an-id an-match"{data}>≡ {esc(identity_text(v.identity))}</span>'
                 f'<span class="an-words">{esc(math_words(key))}</span>'
                 + (f'<span class="an-margin">{esc(margin)}</span>' if margin else ""))
    elif status == "ambiguous":
        short, why = ambiguous_text(v.identity)
        ident = f'<span class="an-id an-ambiguous" title="{esc(why)}">{esc(short)}</span><span class="an-why">{esc(why)}</span>'
    elif status == "no match":
        short, why = kind_words(rec, v, trace)
        css = "an-intermediate" if short.startswith("中间量") else "an-no-match"
        ident = f'<span class="an-id {css}" title="{esc(why)}">{esc(short)}</span><span class="an-why">{esc(why)}</span>'
    else:
        ident = ('<span class="an-id an-no-candidate" title="HF 没有同形状的候选张量 — the peer has no tensor of this shape '
                 'to compare with">无对照 no peer tensor</span>')
    head = (f'<div class="an-var-head"><code class="an-var-name">{esc(v.name)}</code>'
            f'<span class="an-role">{esc(role)}</span>{ident}{unchanged}'
            f'<button type="button" class="an-cite" data-cite="var">复制引用 Copy citation</button></div>')
    first = ", ".join(num(x, 4) for x in v.head)
    stats = (f'<div class="an-stats"><span title="形状 shape, dtype">{esc(list(v.shape))} {esc(v.dtype)}</span>'
             f'<span title="L2 范数 norm">‖·‖₂ = {num(v.norm)}</span><span title="均值 mean">均值 mean {num(v.mean, 3)}</span>'
             f'<span title="最大绝对值 largest magnitude">max |·| {num(v.absmax)}</span>'
             f'<span class="an-head" title="前几个值 first values">[{esc(first)}, …]</span></div>')
    return (f'<div class="an-var" data-var="{esc(v.name)}" data-role="{esc(v.role)}" '
            f'data-cite-text="{esc(cite_text(v, where))}">{head}{stats}</div>')


def fused_html(trace: Trace, rec: LineRecord) -> str:
    """For an eager replay: how far the compiled call's outputs are from this replay's (ulps)."""
    if rec.source != "replay":
        return ""
    checks = [c for c in trace.checks_for(rec.function) if c.get("module") == rec.module and c.get("call") == rec.call]
    if not checks:
        return ""
    parts = []
    for out in checks[0]["outputs"]:
        same = "逐位相同 bit-exact" if not out["max_ulps"] else (
            f"max {num(out['max_ulps'])} ulp，{num(out['n_diff'])} / {num(out['numel'])} 个元素不同 elements differ")
        parts.append(f"<code>{esc(out['name'])}</code> {same}")
    return (f'<div class="an-fused"><b>编译版 vs 重放 fused vs eager</b> 编译后的调用输出与这次重放的差 — the compiled '
            f'call\'s outputs against this replay of its body: {"; ".join(parts)}</div>')


def warnings_html(trace: Trace, rec: LineRecord) -> str:
    """Hazards for this record: the trace's aliasing flags, and alias groups of distinct names it did not flag.

    The trace's "matches no math variable" flags are not repeated here: each tensor already says why
    it has no ≡ (intermediate, aliasing, beyond tolerance)."""
    msgs = [f["message"] for f in trace.flags if rec.id in f.get("records", []) and f.get("kind") != "identity"]
    flagged = {n for f in trace.flags if f.get("kind") == "aliasing" and rec.id in f.get("records", [])
               for n in f.get("names", [])}
    for group in rec.aliases:
        names = [n for n in group.get("names", []) if not n.startswith("return")]
        if len(names) > 1 and not set(names) <= flagged:
            how = "the same tensor" if len(group.get("same", [])) > 1 else "views of one storage"
            msgs.append(f"{' and '.join(names)} are {how}: an in-place update of one changes the other")
    return "".join(f'<div class="an-warn" role="note">⚠ <b>别名 Aliasing</b> 这些变量共用一块内存，原地修改其一会改变另一个 — '
                   f'{esc(m)}</div>' for m in msgs)
