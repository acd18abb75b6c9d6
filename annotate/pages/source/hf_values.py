"""Values panels for HF transformers' source page, from the traces' ``summary.hf_lines``.

The trace of nano-vllm also ran HF's Qwen3 (eager) under the same line recorder
(:mod:`annotate.trace.identify.hf_lines`). This provider gives HF's page the very panel nano-vllm's pages have
(:mod:`annotate.pages.source.values`): a collapsed ``<details class="an-values">`` after each recorded line
with the layer switch, a page-wide trace switch, views loaded from a script beside the page, the
citation buttons, row click and Esc — all from the same ``docs/assets/annotate.js``. A view shows each
HF tensor's shape, ‖·‖ and first values, the math variable it was identified as (by comparison), and
what teaches: how far it is from nano-vllm's tensor identified as the same variable of the same layer,
with a link to that nano-vllm line (the distance was measured when the trace was recorded).
"""
from __future__ import annotations

import json
import posixpath
from typing import Any, Mapping

from annotate.links import FileFacts, page_src_uri
from annotate.pages.base.extras import NoExtras
from annotate.pages.base.trace_set import TraceSet, TraceView
from annotate.pages.base.tracefmt import (NONE_KEY, esc, layer_key, layer_name, margin_text, math_words, num, sup_label,
                                     value_url)
from annotate.pages.source.values import ValuesPanel, script_uri, stats_row, trace_banner
from annotate.vendoring.lock import sha256_bytes

HfRow = dict[str, Any]
OLD_TRACE = ("这份运行录制时还不记录 HF 张量的数值；重新录制即可（annotate trace --force） — this trace was recorded "
             "before HF tensors' values were kept: re-record it (annotate trace --force)")


class HfValues(NoExtras):
    """A :class:`annotate.pages.base.extras.LineExtras` provider for the HF file's page."""

    def __init__(self, traces: TraceSet, files: Mapping[str, FileFacts]) -> None:
        self.shown = hf_views(traces, files)
        self.file = self.shown[0][1].get("file", "") if self.shown else ""
        #: line -> rows of the first shown trace (the page's default)
        self.by_line: dict[int, list[HfRow]] = rows_by_line(self.shown[0][1]) if self.shown else {}
        self._lines = sorted({int(e["line"]) for _, hf in self.shown for e in hf.get("lines", [])})

    def _views(self, path: str) -> list[tuple[TraceView, dict[str, Any]]]:
        return self.shown if path == self.file else []

    # -- the LineExtras protocol
    def line_html(self, path: str, line: int) -> str:
        """The collapsed panel of an HF line that recorded something ('' for any other line)."""
        shown = self._views(path)
        if not shown or line not in self._lines:
            return ""
        keys = layer_keys(shown, line)
        view, hf = next(((v, h) for v, h in shown if rows_by_line(h).get(line)), shown[0])
        layer = next((k for k in keys if k not in ("0", NONE_KEY) and at_layer(hf, line, k)),
                     next((k for k in keys if at_layer(hf, line, k)), keys[0]))
        summary = hf_brief(at_layer(hf, line, layer))
        return (f'<details class="an-values an-hf-values" id="values-L{line}" data-line="{line}" '
                f'data-trace="{esc(view.key)}" data-layer="{layer}">'
                f'<summary><span class="an-values-tag">L{line} 值 values（HF）</span>'
                f'<span class="an-brief">{esc(summary)}</span></summary>'
                f'<div class="an-values-body">{ValuesPanel.controls_html(keys, layer)}</div></details>')

    def page_data(self, path: str) -> dict[str, Any]:
        """The same ``values`` blob nano-vllm's pages carry (annotate.js reads it), for HF's traces."""
        shown = self._views(path)
        if not shown:
            return {}
        return {"hf_traced_lines": self._lines,
                "values": {"traces": [{"key": v.key, "label": v.label, "provenance": v.trace.provenance(),
                                       "src": posixpath.basename(script_uri(path, v.key))} for v, _ in shown],
                           "stale": [], "lines": self._lines,
                           "layers": sorted({n for v, _ in shown for n in v.trace.layers()})}}

    def banner_html(self, path: str) -> str:
        shown = self._views(path)
        return trace_banner(path, [v for v, _ in shown], []) if shown else ""

    def data_files(self, path: str) -> dict[str, str]:
        """One script per trace: every (line, layer) view of HF's rows, as annotate.js expects."""
        out = {}
        for view, hf in self._views(path):
            data: dict[str, dict[str, dict[str, str]]] = {}
            for line in self._lines:
                data[str(line)] = {k: {"b": hf_brief(rows), "h": hf_view_body(view, hf, path, rows, k)}
                                   for k in layer_keys(self.shown, line) for rows in [at_layer(hf, line, k)]}
            text = json.dumps(data, ensure_ascii=False, sort_keys=True).replace("</", "<\\/")
            out[script_uri(path, view.key)] = (f"/* HF values of {esc(path)} in {esc(view.where)}, generated by annotate */\n"
                                               f"(window.anValues = window.anValues || {{}})[{json.dumps(view.key)}] = {text};\n")
        return out


# ---------------------------------------------------------------- rows

def rows_by_line(hf: Mapping[str, Any]) -> dict[int, list[HfRow]]:
    """``summary.hf_lines`` rows grouped by HF line."""
    out: dict[int, list[HfRow]] = {}
    for entry in hf.get("lines", []):
        out.setdefault(int(entry["line"]), []).append(entry)
    return out


def at_layer(hf: Mapping[str, Any], line: int, key: str) -> list[HfRow]:
    """The rows of `line` in the layer named by `key` (``none``: outside the layers)."""
    return [e for e in hf.get("lines", []) if int(e["line"]) == line and layer_key(e.get("layer")) == key]


def layer_keys(shown: list[tuple[TraceView, dict[str, Any]]], line: int) -> list[str]:
    """Every layer of the runs when the line ran inside the layers, plus ``none`` when it ran outside."""
    rows = [e for _, hf in shown for e in hf.get("lines", []) if int(e["line"]) == line]
    layered = any(e.get("layer") is not None for e in rows)
    layers = sorted({n for v, _ in shown for n in v.trace.layers()}) if layered else []
    return [str(n) for n in layers] + ([NONE_KEY] if any(e.get("layer") is None for e in rows) else [])


def hf_brief(rows: list[HfRow]) -> str:
    """The summary line of a (line, layer): what the first module's variables equal."""
    if not rows:
        return "未执行 not run"
    module = rows[0].get("module")
    first = [e for e in rows if e.get("module") == module]
    parts = [f"{e['var']} ≡ {sup_label(e['label'])}" if e.get("status") == "match" and e.get("label")
             else f"{e['var']}: {hf_equals(e)}" for e in first]
    more = len({e.get("module") for e in rows}) - 1
    return " · ".join(parts) + (f" · 另 {more} 个模块 +{more} modules" if more else "")


def hf_equals(entry: HfRow) -> str:
    """What an HF row's variable equals: `≡ x⁽0⁾/RMS(x⁽0⁾)`, `无法区分 ambiguous: a | b`, or no match."""
    if entry.get("status") == "ambiguous":
        return "无法区分 ambiguous: " + " | ".join(sup_label(a) for a in entry.get("ambiguous") or [])
    if entry.get("status") == "no candidate":   # e.g. q_norm, k_norm: per-head shapes no peer variable has
        return "无对照 no peer tensor"
    return f"≡ {sup_label(entry['label'])}" if entry.get("label") else "无匹配 no match"


# ---------------------------------------------------------------- one view

def hf_view_body(view: TraceView, hf: Mapping[str, Any], path: str, rows: list[HfRow], key: str) -> str:
    """Every module's rows of one (line, layer) in one trace, then the provenance."""
    if not rows:
        body = (f'<p class="an-none">这一行在{esc(layer_name(key))}没有执行 — not executed in '
                f'{"this run outside the layers" if key == NONE_KEY else f"layer {key}"}</p>')
    else:
        modules: dict[str, list[HfRow]] = {}
        for e in rows:
            modules.setdefault(str(e.get("module") or e.get("function") or ""), []).append(e)
        where = f"{layer_name(key)} · 运行 trace {view.label} ({view.where})"
        body = "".join(f'<div class="an-rec"><div class="an-rec-head"><code title="模块 module">{esc(m)}</code></div>'
                       + "".join(hf_var_html(e, view, path, f"{where} · {m}") for e in es) + "</div>"
                       for m, es in modules.items())
    prov = f"HF transformers {hf.get('transformers', '?')}, {hf.get('attention', 'eager')} attention; {view.trace.provenance()}"
    return body + f'<p class="an-prov">来源 Provenance: {esc(prov)}</p>'


def hf_var_html(e: HfRow, view: TraceView, path: str, where: str) -> str:
    """One HF tensor: name, ≡ in words with its margin, shape/‖·‖/first values, and nano-vllm's matching tensor."""
    matched = e.get("status") == "match" and e.get("label")
    css = "an-match" if matched else "an-ambiguous" if e.get("status") == "ambiguous" else "an-no-candidate"
    ident = f'<span class="an-id {css}">{esc(hf_equals(e))}</span>'
    notes = ""
    if matched:   # the words after the numbers, as in nano-vllm's panels (values.var_html)
        notes += f'<span class="an-words">{esc(math_words(e.get("identity", "")))}</span>'
        margin = margin_text(e)
        notes += f'<span class="an-margin">{esc(margin)}</span>' if margin else ""
    head = (f'<div class="an-var-head"><code class="an-var-name">{esc(e["var"])}</code>{ident}'
            '<button type="button" class="an-cite" data-cite="var">复制引用 Copy citation</button></div>')
    notes = f'<div class="an-var-notes">{notes}</div>' if notes else ""
    return (f'<div class="an-var" data-var="{esc(e["var"])}" data-role="live" '
            f'data-cite-text="{esc(hf_cite_text(e, where))}">{head}{stats_html(e)}{notes}{nano_html(e, view, path)}</div>')


def stats_html(e: HfRow) -> str:
    """Shape, dtype, ‖·‖₂, mean, max |·| and the first values (or why the trace has none)."""
    if "shape" not in e:
        return f'<p class="an-none">{esc(OLD_TRACE)}</p>'
    return stats_row(list(e["shape"]), str(e.get("dtype", "")), e.get("norm"), e.get("mean"), e.get("absmax"),
                     list(e.get("head", [])))


def nano_words(e: HfRow) -> str:
    """The comparison with nano-vllm in plain text: `qwen3.py:156 residual (x₁⁽²⁾): max |Δ| 0.0039 (1 ulp), rel 0.0012`."""
    n = e.get("nano")
    if not n or e.get("status") != "match":   # a comparison stands on both ≡: none without HF's
        return ""
    return (f"{posixpath.basename(n['file'])}:{n['line']} {n['var']}（{layer_name(layer_key(n['layer']))}）: "
            f"{distance_words(n)}")


def distance_words(n: Mapping[str, Any]) -> str:
    """A measured HF-to-nano-vllm distance in words: bit-exact, or max |Δ| with ulps and rel."""
    if not n["max_abs"]:
        return f"逐位相同 bit-exact（{n.get('dtype', '')}）"
    ulps = f"，{num(n['scale_ulps'], 3)} ulp" if n.get("scale_ulps") is not None else ""
    return f"max |Δ| = {num(n['max_abs'])}（{n.get('dtype', '')}{ulps}），rel {num(n['rel'], 2)}"


def nano_html(e: HfRow, view: TraceView, path: str) -> str:
    """How far this HF tensor is from nano-vllm's tensor of the same math variable, linked to that line."""
    if e.get("status") != "match" or "shape" not in e:
        return ""
    n = e.get("nano")
    if not n:
        return ('<div class="an-vs-nano">nano-vllm 中没有被识别为同一变量的张量 — no nano-vllm tensor was identified '
                'as this variable</div>')
    href = value_url(page_src_uri(path), n["file"], n["line"], n["layer"], view.key)
    same = esc(distance_words(n))
    return (f'<div class="an-vs-nano"><b>与 nano-vllm 对照 compared with nano-vllm</b> '
            f'<a class="an-nano-link" href="{esc(href)}">{esc(posixpath.basename(n["file"]))}:{n["line"]} '
            f'<code>{esc(n["var"])}</code></a>（同为 both ≡ {esc(sup_label(e["label"]))}）: {same}</div>')


def hf_cite_text(e: HfRow, where: str) -> str:
    """The tensor part of an HF citation: name, math variable, where, shape, norm, first values, vs nano-vllm."""
    lines = [f"张量 tensor: {e['var']} {hf_equals(e)}", f"位置 where: {where}"]
    if "shape" in e:
        lines += [f"形状 shape: {list(e['shape'])} {e.get('dtype', '')} · ‖·‖₂ = {num(e.get('norm'))} · "
                  f"max |·| = {num(e.get('absmax'))}",
                  f"前几个值 first values: [{', '.join(num(x, 4) for x in e.get('head', []))}, …]"]
    if nano_words(e):
        lines.append(f"对照 nano-vllm: {nano_words(e)}")
    return "\n".join(lines)


# ---------------------------------------------------------------- which traces

def same_bytes(facts: FileFacts | None, sha256: str) -> bool:
    """Whether today's vendored copy of a file (``facts``, None: not vendored) is the one HF's lines were
    recorded from."""
    return bool(facts and sha256_bytes(facts.data) == sha256)


def hf_view(traces: TraceSet) -> TraceView | None:
    """The trace whose HF lines the site shows: the first fresh-pinned one that recorded them (the
    default trace may not have: a trace made with HF's lines skipped, or before they were recorded)."""
    return next((v for v in traces.views if not v.pin_moved and (v.trace.summary.get("hf_lines") or {}).get("lines")),
                None)


def hf_views(traces: TraceSet, files: Mapping[str, FileFacts]) -> list[tuple[TraceView, dict[str, Any]]]:
    """Every fresh-pinned trace whose HF lines were recorded from today's vendored HF file, with its
    ``summary.hf_lines``, in the site's trace order: the HF page's trace switch offers these."""
    out = []
    for v in traces.views:
        hf = v.trace.summary.get("hf_lines") or {}
        if not v.pin_moved and hf.get("lines") and same_bytes(files.get(hf.get("file", "")), hf.get("sha256") or ""):
            out.append((v, hf))
    return out


def shown_hf_lines(traces: TraceSet, files: Mapping[str, FileFacts]) -> tuple[TraceView, dict[str, Any]] | None:
    """(that trace, its ``summary.hf_lines``) when today's vendored HF file (in ``files``) is the one they
    were recorded from; None: HF's lines are shown nowhere. The HF page and the map both ask here, so
    they show the same trace's lines or neither does."""
    view = hf_view(traces)
    if view is None:
        return None
    hf: dict[str, Any] = view.trace.summary["hf_lines"]
    return (view, hf) if same_bytes(files.get(hf.get("file", "")), hf.get("sha256", "")) else None
