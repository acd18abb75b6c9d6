"""The fused kernel page: each compiled function's Python body beside the kernel the trace captured.

For ``RMSNorm.add_rms_forward``, ``RMSNorm.rms_forward``, ``SiluAndMul.forward`` and
``RotaryEmbedding.forward``: the body as vendored, the kernel(s) Inductor generated in the recorded run
(C++ on CPU, Triton on GPU — one column per trace), the bytes the fused kernel must move (its tensor
arguments and parameters read, its outputs written; shapes and dtypes from the trace), the
intermediates the eager body materialises instead, the fused-vs-eager distance, and — when a GPU trace
carries ``bandwidth.json`` — the achieved bandwidth. For each Triton kernel, statement by statement:
which kernel lines each Python statement became and which of the eager body's roundings the kernel
keeps or drops, found by :mod:`annotate.pages.traces.kernel_flow` from the two texts. On the site, the code of a
kernel shown closed is a script of its own, loaded when the reader opens it (:func:`lazy_code`, docs/js/kernels.js).
"""
from __future__ import annotations

import hashlib
import json

from dataclasses import dataclass
from typing import Callable, Mapping

from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import CppLexer, PythonLexer, get_lexer_by_name

from annotate.render.held import hold
from annotate.links import relative
from annotate.pages.base.folds import asset_tags
from annotate.pages.traces import kernel_flow
from annotate.pages.base.trace_set import TraceSet, TraceView
from annotate.pages.base.tracefmt import esc, human_bytes, nbytes, num
from annotate.source import AnchorError, SourceFile
from annotate.trace.format.schema import LineRecord
from annotate.trace.format.store import Trace

FUNCTIONS = ("RMSNorm.add_rms_forward", "RMSNorm.rms_forward", "SiluAndMul.forward", "RotaryEmbedding.forward")
PARAMS = {"RMSNorm.add_rms_forward": ("weight γ",), "RMSNorm.rms_forward": ("weight γ",), "SiluAndMul.forward": (),
          "RotaryEmbedding.forward": ()}
KERNELS_URI = "trace/kernels.md"
#: where a closed kernel's code goes, one script each (docs-relative), and the page script that loads one when
#: the reader opens it (docs/js/kernels.js). Inline, every kernel of every trace made the page 2 MB: 9 s to
#: open on a phone here, for code that is mostly behind a closed <details>
KERNEL_CODE_DIR = "trace/kernels"
KERNELS_JS = "js/kernels.js"


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


def render(sources: Mapping[str, SourceFile], traces: TraceSet, href: Callable[[str, int], str],
           files: dict[str, str] | None = None) -> str:
    """The page's Markdown (raw HTML blocks, no blank line inside any). With ``files`` (site path -> text), the
    code of each kernel shown closed goes there, one script each, loaded when the reader opens it (:func:`lazy_code`);
    without, every kernel's code is inline."""
    views = [v for v in traces.views if not v.pin_moved]
    out = ["---\ntitle: 融合内核 Fused kernels\nhide:\n  - toc\n---\n", "# 融合内核 Fused kernels\n",
           "nano-vllm 用 `@torch.compile` 包住 RMSNorm、SwiGLU 的激活和旋转位置编码：编译器把函数体里一行行的张量运算"
           "融合成一个内核，只读一次输入、写一次输出。下面左边是源码里的函数体，右边是记录运行时编译器实际生成的内核"
           "（CPU 上是 Inductor 的 C++，GPU 上是 Triton），字节数由轨迹里记录的形状和 dtype 算出。\n\n"
           "nano-vllm wraps RMSNorm, the SwiGLU activation and the rotary embedding in `@torch.compile`: the "
           "compiler fuses the body's "
           "line-by-line tensor operations into one kernel that reads its inputs once and writes its outputs once. "
           "Left: the body as vendored; right: the kernel the compiler generated in the recorded run (Inductor C++ "
           "on CPU, Triton on GPU). Byte counts are computed from the shapes and dtypes in the trace.\n"]
    out.append("## 编译的证据 Evidence that they ran compiled\n\n"
               "每条轨迹自己的证据（CPU 上 Inductor 的图计数可作证；CUDA 上不可，靠其余几项）。"
               " Each trace's own evidence (on the CPU Inductor's graph count proves it; on CUDA it does not, and the "
               "rest has to).\n\n" + "".join(f"- **{esc(v.label)}**: {compile_evidence(v.trace)}\n" for v in views))
    for function in FUNCTIONS:
        out.append(section(sources, views, function, href, files))
    if files is not None:
        out.append(asset_tags(KERNELS_URI, KERNELS_JS))
    return "\n".join(out)


def lazy_code(code_html: str, files: dict[str, str]) -> str:
    """A closed kernel's body: a note that its code loads when opened, the code itself in a script of its own
    under :data:`KERNEL_CODE_DIR` (named by its content's hash), which docs/js/kernels.js loads and puts here."""
    key = hashlib.sha256(code_html.encode("utf-8")).hexdigest()[:16]
    path = f"{KERNEL_CODE_DIR}/{key}.js"
    files[path] = f"(window.anKernelCode = window.anKernelCode || {{}})[{json.dumps(key)}] = {json.dumps(code_html)};\n"
    return (f'<p class="an-kernel-lazy" data-an-code="{key}" data-an-src="{relative(KERNELS_URI, path)}">'
            "打开时载入（需要 JavaScript） · loaded when opened (needs JavaScript)</p>")


def section(sources: Mapping[str, SourceFile], views: list[TraceView], function: str,
            href: Callable[[str, int], str], files: dict[str, str] | None = None) -> str:
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
    right = "".join(_kernels(v, function, opened=i == 0, files=files) for i, v in enumerate(views))
    # kept out of the search index: the body is on its source page already, and generated kernels are
    # long and never what a reader searches for. Material's search skips a data-search-exclude element
    # only until the first closing tag of the same name, so the marker sits on a <figure>, which
    # nothing inside repeats
    # the code and the maps are most of the page's bytes: held back from Markdown's HTML scans (render/held.py)
    parts.append(hold(f'<figure class="an-kernel-code" data-search-exclude><div class="an-kernel-grid"><div>'
                      f'<b>Python 函数体 body</b>{left}</div><div>{right}</div></div></figure>'))
    model = sources.get(info.get("file", ""))
    for v in views:
        maps = statement_maps(v, function, model.text if model else None, info.get("file", ""), href)
        parts.append(hold(maps) if maps else "")
    for v in views:
        bw = v.trace.bandwidth() if function == "RMSNorm.add_rms_forward" else None
        if bw:
            parts.append(_bandwidth(v, bw))
    return "\n".join(p for p in parts if p) + "\n"


def _arg_kinds(trace: Trace, function: str) -> dict[str, str]:
    """Each argument's dtype kind (model, f32, int) from the first call's entry record."""
    entry = next((r for r in _first_call(trace, function) if r.kind == "entry"), None)
    kinds = {}
    for v in entry.vars if entry else []:
        if v.role == "argument":
            kinds[v.name] = ("int" if "int" in v.dtype or v.dtype == "bool" else
                             "model" if v.dtype in ("bfloat16", "float16") else "f32")
    return kinds


def kernel_maps(trace: Trace, function: str, file_text: str) -> list[kernel_flow.KernelMap]:
    """Every Triton kernel of `function` compiled in this run, read against its Python body."""
    body = kernel_flow.read_body(file_text, function, _arg_kinds(trace, function))
    if body is None:
        return []
    mods = [k for k in trace.kernels_for(function) if k.get("this_run", True)] or trace.kernels_for(function)
    out = []
    for mod in mods:
        for k in mod["kernels"]:
            parsed = kernel_flow.parse_kernel(k["name"], k["source"]) if k["language"] == "triton" else None
            if parsed is not None:
                out.append(kernel_flow.analyse(parsed, body, kernel_flow.wrapper_returns(mod["code"], parsed)))
    return out


#: what each kind of kernel line does, in our words (Chinese, English)
KIND_WORDS = {
    "load": ("读入", "load"), "widen": ("转成 fp32", "widen to fp32"), "square": ("平方", "square"),
    "mul": ("乘", "multiply"), "add": ("加", "add"), "sub": ("减", "subtract"), "div": ("除", "divide"),
    "neg": ("取负", "negate"), "exp": ("指数", "exp"), "rsqrt": ("平方根倒数", "rsqrt"),
    "sum": ("行内求和（归约）", "sum over the row (reduction)"), "select": ("按位置取两半之一（拼接）", "pick a half by position (cat)"),
    "store": ("写回", "store"), "stays-f32": ("仍是 fp32，不舍入", "stays fp32: no rounding"),
}


def _detail(line: kernel_flow.KernelLine, m: kernel_flow.KernelMap) -> str:
    """A load's pointer with the body's name for it; a store's pointer and whether it rounds."""
    if not line.detail:
        return ""
    words = line.detail.split()
    ptr = words[0]
    name = m.binding.get(ptr)
    if ptr.startswith("out_ptr") and ptr in m.outputs:
        name = f"return[{m.outputs[ptr]}]"
    extra = {"half 0": "前半 first half", "half 1": "后半 second half", "gathered": "按 positions 取行 row gathered by index",
             "widened": "转成 fp32 widened to fp32", "rounds": "舍入到 16 位（唯一一次） rounded to 16 bits here"}
    rest = " ".join(words[1:])
    notes = [zh for key, zh in extra.items() if key in rest]
    dtype = words[1] if len(words) > 1 and words[1].startswith("(") else ""
    return f" <code>{esc(ptr)}</code> = {esc(name or '?')} {esc(dtype)}" + (f"，{esc('；'.join(notes))}" if notes else "")


def _where(file: str, where: tuple[int, ...], href: Callable[[str, int], str]) -> str:
    """``layernorm.py:25`` (linked), or ``rotary_embedding.py:46 → :12`` for a helper's line called from 46."""
    name = file.rsplit("/", 1)[-1]
    links = [f'<a href="{esc(href(file, ln))}">{esc(name if i == 0 else "")}:{ln}</a>' for i, ln in enumerate(where)]
    return " → ".join(links)


def _rounding_words(r: kernel_flow.Rounding, file: str, dtype: str, href: Callable[[str, int], str]) -> str:
    """One eager rounding and what the kernel does there, Chinese then English."""
    at, n, d = _where(file, r.where, href), r.kernel_line, esc(dtype)
    if r.fate == "store":
        return (f"<li>{at}：eager 在这里舍入到 {d}；内核在第 {n} 行写回 {d} 指针时同样舍入一次。"
                f" Eager rounds to {d} here; the kernel rounds the same value where it stores it to a {d} "
                f"pointer (kernel line {n}).</li>")
    if r.fate == "cast":
        return (f"<li>{at}：eager 在这里舍入；内核在第 {n} 行显式转换，同样舍入。 Eager rounds here; the kernel "
                f"casts explicitly (kernel line {n}) and rounds too.</li>")
    zh_kept = f"第 {n} 行的 <code>.to(tl.float32)</code> 把值留在 fp32" if n else "内核一直用 fp32 计算"
    en_kept = f"kernel line {n}'s <code>.to(tl.float32)</code> keeps it float32" if n else "it computes on in float32"
    return (f"<li><b>{at}：eager 在这里把 fp32 的值舍入到 {d}，内核没有这次舍入</b>——{zh_kept}，接着用它计算，"
            f"直到写回时才舍入一次。融合版与 eager 的差别（最多约 1 ulp）就来自这里。 "
            f"<b>Eager rounds the float32 value to {d} here; the kernel does not</b>: {en_kept} and goes on "
            "computing with it, rounding once, at the store. This is where fused and eager part (by about one ulp "
            "at most).</li>")


def _fma(m: kernel_flow.KernelMap) -> bool:
    """Whether a multiply feeds an add or subtract in a kernel compiled with fp fusion (an FMA candidate)."""
    if not m.fp_fusion:
        return False
    muls = {f"tmp{t}" for ln, kl in m.lines.items() if kl.kind == "mul" for t in [kl.text.split("=")[0].strip()[3:]]}
    return any(kl.kind in ("add", "sub") and any(n in kl.text.split("=", 1)[1].split() for n in muls)
               for kl in m.lines.values())


def statement_maps(view: TraceView, function: str, file_text: str | None, file: str,
                   href: Callable[[str, int], str]) -> str:
    """Per Triton kernel of this trace: Python statement -> kernel lines, and each eager rounding's fate."""
    maps = kernel_maps(view.trace, function, file_text) if file_text else []
    if not maps:
        return ""
    dtype = str(view.trace.meta.get("dtype", ""))
    checks = view.trace.checks_for(function)
    worst = max((o["max_ulps"] for c in checks for o in c["outputs"]), default=None)
    differ = sum(o["n_diff"] for c in checks for o in c["outputs"])
    out = [f"<h3>逐句对照 Statement by statement · {esc(view.label)}</h3>",
           "<p>下表由两份文本分析得出：内核的每一行（读入、转换、运算、归约、写回）对应函数体里构造同一个子表达式的那条语句；"
           "舍入与转成 fp32 不改变结构，所以比较时略去，再逐个检查 eager 的每次舍入在内核里是否还在。"
           " Found by analysing both texts: each kernel line (load, cast, arithmetic, reduction, store) belongs to the "
           "statement of the body that builds the same sub-expression; roundings and widenings change no structure, so "
           "the comparison leaves them out and then looks for each of the eager body's roundings in the kernel.</p>"]
    for m in maps:
        rows = []
        for where, lines in m.statements.items():
            cells = "".join(
                f"<li><code>{esc(m.lines[ln].text)}</code> — {esc(' '.join(KIND_WORDS.get(m.lines[ln].kind, ('', ''))))}"
                f"{_detail(m.lines[ln], m)}</li>" for ln in lines)
            rows.append(f"<tr><td>{_where(file, where, href)}</td><td><ul>{cells}</ul></td></tr>")
        other = [ln for ln, kl in m.lines.items() if kl.kind in ("index", "const")]
        rows.append(f"<tr><td>—</td><td>另有 {len(other)} 行是下标、掩码、常数与越界检查，不对应语句。 {len(other)} more lines "
                    "compute indices, masks, constants and bounds checks: no statement of the body.</td></tr>")
        if m.unmatched:
            rows.append("<tr><td>?</td><td><ul>" + "".join(
                f"<li><code>{esc(m.lines[ln].text)}</code> — 没有找到对应语句 no statement found</li>" for ln in m.unmatched)
                + "</ul></td></tr>")
        roundings = "".join(_rounding_words(r, file, dtype, href) for r in m.roundings)
        absent = [r for r in m.roundings if r.fate == "absent"]
        if not absent:
            roundings += ("<li>eager 的每次舍入内核都保留了。 The kernel keeps every rounding the eager body does."
                          + (" 但编译时允许 fp 融合（enable_fp_fusion=True），乘后接加减的运算可合成一条 FMA、少舍入一次；"
                             "实测的个别 1 ulp 之差与此相符（这里没有证明）。 It was compiled with fp fusion "
                             "(enable_fp_fusion=True), so a multiply followed by an add or subtract may become one FMA "
                             "that rounds once instead of twice; the few one-ulp differences measured are consistent with "
                             "that (not proved here)." if _fma(m) and differ else "") + "</li>")
        out.append(f'<p><b>{esc(m.kernel)}</b>（指针 pointers: '
                   + ", ".join(f"<code>{esc(p)}</code> = {esc(n)}" for p, n in m.binding.items()) + "）</p>"
                   + f'<div class="an-table"><table><thead><tr><th>语句 statement</th><th>内核行 kernel lines</th></tr>'
                   f'</thead><tbody>{"".join(rows)}</tbody></table></div>'
                   f"<p><b>舍入 Roundings</b></p><ul>{roundings}</ul>")
    if worst is not None:
        out.append(f"<p>实测 Measured over {len(checks)} calls: 融合 vs eager fused vs eager ≤ {num(worst)} ulp, "
                   f"{num(differ)} elements differ.</p>")
    return "\n".join(out)


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


def _kernels(view: TraceView, function: str, opened: bool = True, files: dict[str, str] | None = None) -> str:
    """The kernels of the first module compiled in this run (others: how many, collapsed), then the whole module.
    With ``files``, the code of each one shown closed is loaded when opened (:func:`lazy_code`)."""
    mods = [k for k in view.trace.kernels_for(function) if k.get("this_run", True)] or view.trace.kernels_for(function)
    if not mods:
        return f"<p>{esc(view.label)}: 没有捕获到内核 — no kernel captured.</p>"
    out = []
    for i, mod in enumerate(mods):
        attr = " open" if opened and i == 0 else ""
        for k in mod["kernels"]:
            lang = {"cpp": "Inductor C++", "triton": "Triton"}.get(k["language"], k["language"])
            note = "" if i == 0 else f" (compile {mod.get('compile_index')}: another input shape or stride)"
            code = _code(k["source"], _lexer(k["language"]), 1)
            body = lazy_code(code, files) if files is not None and not attr else code
            out.append(f'<details class="an-kernel"{attr}><summary><b>{esc(view.label)}</b> · {esc(lang)} · '
                       f'<code>{esc(k["name"])}</code>{esc(note)}</summary>{body}</details>')
        whole = _code(mod["code"], PythonLexer())
        out.append(f'<details class="an-kernel"><summary>{esc(view.label)} · Inductor 生成的整个模块 the whole '
                   f'generated module ({num(len(mod["code"]))} chars)</summary>'
                   f'{lazy_code(whole, files) if files is not None else whole}</details>')
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



def compile_evidence(trace: Trace) -> str:
    """What shows that this trace's compiled functions ran compiled, from its meta, kernels and checks (escaped
    text, Chinese then English). Inductor's graph count proves it on the CPU traces; on CUDA it is not
    trusted, and the evidence is the absence of eager escapes, the captured kernels and the fused-vs-eager gaps."""
    c = trace.meta.get("compiled") or {}
    trusted = c.get("graph_count_trusted") or {}
    functions = sorted(set(trusted) | set(c.get("compiled_calls") or {}))
    if not functions:
        return "—"
    escapes = sum((c.get("eager_escapes") or {}).values())
    counted = sum(bool(trusted.get(f)) for f in functions)
    kernels = sum(any(m.get("kernels") for m in trace.kernels_for(f)) for f in functions)
    langs = sorted({k["language"] for f in functions for m in trace.kernels_for(f) for k in m.get("kernels", [])})
    worst = max((o["max_ulps"] for f in functions for ch in trace.checks_for(f) for o in ch["outputs"]), default=None)
    gap = "—" if worst is None else f"≤ {num(worst)} ulp"
    ran = "是 yes" if c.get("ran_compiled") else "否 NO"
    lang = "/".join({"cpp": "C++", "triton": "Triton"}.get(x, x) for x in langs) or "—"
    if counted == len(functions):
        how = (f"Inductor 图计数证明 {counted}/{len(functions)} 个函数 — proved by Inductor's graph count for "
               f"{counted} of {len(functions)} functions")
    else:
        how = (f"图计数不可作证（{counted}/{len(functions)} 可信）— Inductor's graph count is not trusted here "
               f"({counted} of {len(functions)})")
    return esc(f"以编译版运行 ran compiled: {ran}; {how}; 重放之外的 eager 逃逸 eager escapes: {escapes}; "
               f"捕获到内核 kernels captured: {kernels}/{len(functions)} ({lang}); 融合 vs eager fused vs eager: {gap}")
