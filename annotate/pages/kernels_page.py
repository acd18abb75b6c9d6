"""The fused kernel page: each compiled function's Python body beside the kernel the trace captured.

For ``RMSNorm.add_rms_forward``, ``RMSNorm.rms_forward`` and ``SiluAndMul.forward``: the body as
vendored, the kernel(s) Inductor generated in the recorded run (C++ on CPU, Triton on GPU — one
column per trace), the bytes the fused kernel must move (its tensor arguments and parameters read,
its outputs written; shapes and dtypes from the trace), the intermediates the eager body
materialises instead, the fused-vs-eager distance, and — when a GPU trace carries
``bandwidth.json`` — the achieved bandwidth.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import CppLexer, PythonLexer, get_lexer_by_name

from annotate.pages.trace_set import TraceSet, TraceView
from annotate.pages.tracefmt import esc, human_bytes, nbytes, num
from annotate.source import AnchorError, SourceFile
from annotate.trace.schema import LineRecord
from annotate.trace.store import Trace

FUNCTIONS = ("RMSNorm.add_rms_forward", "RMSNorm.rms_forward", "SiluAndMul.forward")
PARAMS = {"RMSNorm.add_rms_forward": ("weight γ",), "RMSNorm.rms_forward": ("weight γ",), "SiluAndMul.forward": ()}
KERNELS_URI = "trace/kernels.md"


@dataclass
class Traffic:
    """Bytes one call of a compiled function moves, from the shapes/dtypes of its first recorded call."""

    reads: list[tuple[str, int]]
    writes: list[tuple[str, int]]
    eager_intermediates: list[tuple[str, int]]   # tensors the eager body writes, line by line

    @property
    def fused(self) -> int:
        return sum(b for _, b in self.reads + self.writes)

    @property
    def eager(self) -> int:
        return sum(b for _, b in self.eager_intermediates)


def _first_call(trace: Trace, function: str) -> list[LineRecord]:
    """The replay records of the first call of `function` (entry first)."""
    recs = [r for r in trace.records if r.function == function]
    if not recs:
        return []
    first = (recs[0].module, recs[0].layer, recs[0].call)
    return [r for r in recs if (r.module, r.layer, r.call) == first]


def traffic(trace: Trace, function: str) -> Traffic | None:
    """Reads (tensor arguments + parameters of the last dim's size), writes (distinct outputs), eager intermediates."""
    recs = _first_call(trace, function)
    entry = next((r for r in recs if r.kind == "entry"), None)
    ret = next((r for r in recs if r.kind == "line" and r.text.startswith("return")), None)
    if entry is None or ret is None:
        return None
    args = [v for v in entry.vars if v.role == "argument"]
    reads = [(f"{v.name} {list(v.shape)} {v.dtype}", nbytes(v.shape, v.dtype)) for v in args]
    if args:
        width, dtype = args[0].shape[-1], trace.meta["dtype"]
        reads += [(f"{p} [{width}] {dtype}", nbytes([width], dtype)) for p in PARAMS.get(function, ())]
    writes = [(f"{v.name} {list(v.shape)} {v.dtype}", nbytes(v.shape, v.dtype)) for v in ret.vars if v.role == "return"]
    inter = [(f"L{r.line} {v.name} {list(v.shape)} {v.dtype}", nbytes(v.shape, v.dtype))
             for r in recs if r.kind == "line" for v in r.vars if v.role == "assigned"]
    return Traffic(reads, writes, inter)


def body_source(sources: Mapping[str, SourceFile], trace: Trace, function: str) -> tuple[str, int, int] | None:
    """(text, first line, last line) of the function as vendored (``sources``: the build's parsed files):
    first decorator line through its end (the tree-sitter model's symbol span); None when the trace or
    the vendored file lacks it."""
    info = trace.function(function)
    model = sources.get(info["file"]) if info and info.get("statements") else None
    if model is None:
        return None
    try:
        start, end = model.symbol(function).span
    except AnchorError:
        return None
    return "\n".join(model.lines[start - 1:end]), start, end


def _code(text: str, lexer, first_line: int | None = None) -> str:
    """Highlighted code as one HTML line (newlines as &#10;, so Markdown keeps the block whole)."""
    body = highlight(text, lexer, HtmlFormatter(nowrap=True))
    if first_line is not None:
        width = len(str(first_line + text.count("\n")))
        body = "\n".join(f'<span class="an-kln">{n:>{width}}</span>  {ln}'
                         for n, ln in enumerate(body.rstrip("\n").split("\n"), start=first_line))
    return f'<div class="highlight"><pre><code>{body.rstrip().replace(chr(10), "&#10;")}</code></pre></div>'


def _lexer(language: str):
    try:
        return get_lexer_by_name("python" if language == "triton" else language)
    except Exception:
        return CppLexer() if language == "cpp" else get_lexer_by_name("text")


def render(sources: Mapping[str, SourceFile], traces: TraceSet, href: Callable[[str, int], str]) -> str:
    """The page's Markdown (raw HTML blocks, no blank line inside any)."""
    views = [v for v in traces.views if not v.pin_moved]
    out = ["---\ntitle: 融合内核 Fused kernels\nhide:\n  - toc\n---\n", "# 融合内核 Fused kernels\n",
           "nano-vllm 用 `@torch.compile` 包住 RMSNorm 和 SwiGLU 的激活：编译器把函数体里一行行的张量运算"
           "融合成一个内核，只读一次输入、写一次输出。下面左边是源码里的函数体，右边是记录运行时编译器实际生成的内核"
           "（CPU 上是 Inductor 的 C++，GPU 上是 Triton），字节数由轨迹里记录的形状和 dtype 算出。\n\n"
           "nano-vllm wraps RMSNorm and the SwiGLU activation in `@torch.compile`: the compiler fuses the body's "
           "line-by-line tensor operations into one kernel that reads its inputs once and writes its outputs once. "
           "Left: the body as vendored; right: the kernel the compiler generated in the recorded run (Inductor C++ "
           "on CPU, Triton on GPU). Byte counts are computed from the shapes and dtypes in the trace.\n"]
    for function in FUNCTIONS:
        out.append(section(sources, views, function, href))
    return "\n".join(out)


def section(sources: Mapping[str, SourceFile], views: list[TraceView], function: str,
            href: Callable[[str, int], str]) -> str:
    """One compiled function: traffic table per trace, body beside kernels, fused-vs-eager, bandwidth."""
    base = next((v for v in views if v.trace.function(function)), None)
    if base is None:
        return f"## `{function}`\n\n本轨迹没有记录这个函数 — no trace recorded this function.\n"
    src = body_source(sources, base.trace, function)
    info = base.trace.function(function) or {}
    parts = [f"## `{function}`\n"]
    if src:
        text, a, b = src
        parts.append(f'<p class="an-kernel-src"><a href="{esc(href(info["file"], a))}">{esc(info["file"])}:{a}–{b}</a></p>')
    parts.append(_traffic_table(views, function))
    left = _code(src[0], PythonLexer(), src[1]) if src else ""
    right = "".join(_kernels(v, function, opened=i == 0) for i, v in enumerate(views))
    # kept out of the search index: the body is on its source page already, and generated kernels are
    # long and never what a reader searches for. Material's search skips a data-search-exclude element
    # only until the first closing tag of the same name, so the marker sits on a <figure>, which
    # nothing inside repeats
    parts.append(f'<figure class="an-kernel-code" data-search-exclude><div class="an-kernel-grid"><div>'
                 f'<b>Python 函数体 body</b>{left}</div><div>{right}</div></div></figure>')
    for v in views:
        bw = v.trace.bandwidth() if function == "RMSNorm.add_rms_forward" else None
        if bw:
            parts.append(_bandwidth(v, bw))
    return "\n".join(parts) + "\n"


def _traffic_table(views: list[TraceView], function: str) -> str:
    """Per trace: what the fused kernel reads and writes, its total, the eager body's intermediates, fused vs eager."""
    items = []
    for v in views:
        t = traffic(v.trace, function)
        if t is None:
            continue
        checks = v.trace.checks_for(function)
        worst = max((o["max_ulps"] for c in checks for o in c["outputs"]), default=None)
        same = "—" if worst is None else ("bit-exact" if not worst else f"≤ {num(worst)} ulp")
        fmt = lambda pairs: ", ".join(f"<code>{esc(n)}</code> {human_bytes(b)}" for n, b in pairs)  # noqa: E731
        items.append(f"<li><b>{esc(v.label)}</b>: 融合内核 the fused kernel reads {fmt(t.reads)} and writes "
                     f"{fmt(t.writes)} — <b>{human_bytes(t.fused)}</b> ({num(t.fused)} B) per call. "
                     f"逐行执行的函数体另外写出 The eager body, line by line, writes {fmt(t.eager_intermediates)} — "
                     f"<b>{human_bytes(t.eager)}</b> of intermediates that the next line reads back. "
                     f"Fused vs eager outputs: {same} over {len(checks)} calls.</li>")
    return f'<ul class="an-traffic">{"".join(items)}</ul>' if items else ""


def _kernels(view: TraceView, function: str, opened: bool = True) -> str:
    """The kernels of the first module compiled in this run (others: how many, collapsed), then the whole module."""
    mods = [k for k in view.trace.kernels_for(function) if k.get("this_run", True)] or view.trace.kernels_for(function)
    if not mods:
        return f"<p>{esc(view.label)}: 没有捕获到内核 — no kernel captured.</p>"
    out = []
    for i, mod in enumerate(mods):
        attr = " open" if opened and i == 0 else ""
        for k in mod["kernels"]:
            lang = {"cpp": "Inductor C++", "triton": "Triton"}.get(k["language"], k["language"])
            note = "" if i == 0 else f" (compile {mod.get('compile_index')}: another input shape or stride)"
            out.append(f'<details class="an-kernel"{attr}><summary><b>{esc(view.label)}</b> · {esc(lang)} · '
                       f'<code>{esc(k["name"])}</code>{esc(note)}</summary>{_code(k["source"], _lexer(k["language"]))}</details>')
        out.append(f'<details class="an-kernel"><summary>{esc(view.label)} · Inductor 生成的整个模块 the whole '
                   f'generated module ({num(len(mod["code"]))} chars)</summary>{_code(mod["code"], PythonLexer())}</details>')
    return "".join(out)


def _method(bw: dict) -> str:
    """How the timings were taken, from the JSON's "method" (older files: "iters" single-call timings)."""
    m = bw.get("method")
    if not isinstance(m, dict):
        return f"中位数 median of {bw.get('iters', '?')} single calls"
    return (f"中位数 median of {m.get('repeats', '?')} repeats × {m.get('calls_per_repeat', '?')} calls "
            f"after {m.get('warmup_calls', '?')} warm-up calls; {m.get('timer', '?')}")


def _bandwidth(view: TraceView, bw: dict) -> str:
    """The GPU check's timings: median time and achieved bandwidth of fused, eager and a plain copy."""
    med, gbps, frac = bw.get("median_s", {}), bw.get("bandwidth_GBps", {}), bw.get("fraction_of_copy", {})
    rows = "".join(f"<tr><td>{esc(k)}</td><td>{num(med.get(k, 0) * 1e6)} µs</td><td>{num(gbps.get(k))} GB/s</td>"
                   f"<td>{'—' if k not in frac else f'{frac[k]:.0%}'}</td></tr>" for k in ("fused", "eager", "copy"))
    return (f'<p><b>实测带宽 Achieved bandwidth</b> ({esc(bw.get("device_name", view.label))}, {esc(bw.get("dtype"))}, '
            f'{num(bw.get("tokens"))} × {num(bw.get("hidden"))}, {human_bytes(bw.get("bytes_moved", 0))} moved per call, '
            f'{esc(_method(bw))}; speed-up vs eager ×{num(bw.get("fused_speedup_vs_eager"), 3)})</p>'
            f'<div class="an-table"><table><thead><tr><th></th><th>median</th><th>bandwidth</th><th>of copy</th></tr>'
            f'</thead><tbody>{rows}</tbody></table></div>')

