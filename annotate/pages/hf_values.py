"""Values panels for HF transformers' source page, from a trace's ``summary.hf_lines``.

The trace of nano-vllm also ran HF's Qwen3 (eager) under the same line recorder
(:mod:`annotate.trace.hf_lines`); after each HF line that recorded something, this provider places a
collapsed panel: per layer, which variable held which math value (found by comparison) and how far it
is from HF's own captured value. Plain ``<details>``: it works without scripts and offline.
"""
from __future__ import annotations

import html
from typing import Any, Mapping

from annotate.links import FileFacts
from annotate.pages.extras import NoExtras
from annotate.pages.trace_set import TraceSet, TraceView
from annotate.pages.tracefmt import sup_label
from annotate.vendoring.lock import sha256_bytes


class HfValues(NoExtras):
    """A :class:`annotate.pages.extras.LineExtras` provider for the HF file's page."""

    def __init__(self, traces: TraceSet, files: Mapping[str, FileFacts]) -> None:
        shown = shown_hf_lines(traces, files)
        self.trace = shown[0].trace if shown else None
        hf = shown[1] if shown else {}
        self.file = hf.get("file", "")
        self.note = f"HF transformers {hf.get('transformers', '?')}, {hf.get('attention', 'eager')} attention"
        self.by_line: dict[int, list[dict[str, Any]]] = {}
        for entry in hf.get("lines", []):
            self.by_line.setdefault(int(entry["line"]), []).append(entry)

    def line_html(self, path: str, line: int) -> str:
        entries = self.by_line.get(line) if path == self.file else None
        if not entries:
            return ""
        rows = "".join(
            f"<tr><td>{'—' if e['layer'] is None else e['layer']}</td><td><code>{html.escape(str(e['module'] or ''))}</code></td>"
            f"<td><code>{html.escape(e['var'])}</code></td><td>{html.escape(hf_equals(e))}</td>"
            f"<td>{_num(e['max_abs'])}</td><td>{html.escape(_runner(e))}</td></tr>"
            for e in entries)
        return (f'<details class="an-hf-values" id="hf-values-L{line}" data-line="{line}">'
                f"<summary>L{line} 值 values（HF 逐行记录 traced）</summary>"
                '<div class="an-table"><table><thead><tr><th>层 layer</th><th>模块 module</th><th>变量 variable</th>'
                "<th>等于 equals (by comparison)</th><th>max |Δ|</th><th>次近与裕度 runner-up, margin</th></tr></thead>"
                f"<tbody>{rows}</tbody></table></div>"
                f'<p class="an-hf-values-trace">{html.escape(self.note)}; '
                f'{html.escape(self.trace.provenance() if self.trace else "")}</p></details>')

    def page_data(self, path: str) -> dict[str, Any]:
        return {"hf_traced_lines": sorted(self.by_line)} if path == self.file and self.by_line else {}


def _num(value: float | None) -> str:
    return "—" if value is None else f"{value:.3g}"


def hf_equals(entry: dict[str, Any]) -> str:
    """What an HF row's variable equals: `≡ x⁽0⁾/RMS(x⁽0⁾)`, `无法区分 ambiguous: a | b`, or no match."""
    if entry.get("status") == "ambiguous":
        return "无法区分 ambiguous: " + " | ".join(sup_label(a) for a in entry.get("ambiguous") or [])
    if entry.get("status") == "no candidate":   # e.g. q_norm, k_norm: per-head shapes no peer variable has
        return "无对照 no peer tensor"
    return f"≡ {sup_label(entry['label'])}" if entry.get("label") else "无匹配 no match"


def _runner(entry: dict[str, Any]) -> str:
    """The runner-up and the margin a row's ≡ was claimed with (— for traces recorded without one)."""
    runner, margin = entry.get("runner_up"), entry.get("margin")
    if not runner or margin is None:
        return "—"
    label = sup_label(runner["label"])
    return f"{label} (rel {_num(runner.get('rel'))}), 裕度 margin {_num(margin)} ≥ {_num(entry.get('required'))}" \
        if entry.get("status") == "match" else f"{label} (rel {_num(runner.get('rel'))})"


def same_bytes(facts: FileFacts | None, sha256: str) -> bool:
    """Whether today's vendored copy of a file (``facts``, None: not vendored) is the one HF's lines were
    recorded from."""
    return bool(facts and sha256_bytes(facts.data) == sha256)


def hf_view(traces: TraceSet) -> TraceView | None:
    """The trace whose HF lines the site shows: the first fresh-pinned one that recorded them (the
    default trace may not have: a trace made with HF's lines skipped, or before they were recorded)."""
    return next((v for v in traces.views if not v.pin_moved and (v.trace.summary.get("hf_lines") or {}).get("lines")),
                None)


def shown_hf_lines(traces: TraceSet, files: Mapping[str, FileFacts]) -> tuple[TraceView, dict[str, Any]] | None:
    """(that trace, its ``summary.hf_lines``) when today's vendored HF file (in ``files``) is the one they
    were recorded from; None: HF's lines are shown nowhere. The HF page and the map both ask here, so
    they show the same trace's lines or neither does."""
    view = hf_view(traces)
    if view is None:
        return None
    hf: dict[str, Any] = view.trace.summary["hf_lines"]
    return (view, hf) if same_bytes(files.get(hf.get("file", "")), hf.get("sha256", "")) else None
