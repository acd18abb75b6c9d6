"""The numerics page: where nano-vllm and HF transformers differ, and the float32 aliasing hazard.

Every number on the page is read from a trace (or computed from tensors a trace saved); the prose
around them is fixed. Sections:

1. nano-vllm normalises the *unrounded* fp32 sum, HF the *rounded* residual: per layer, the distance
   of the residuals and of the normalised outputs to HF (from the identities), and inside
   ``add_rms_forward`` the norm of the fp32 sum against the rounded residual (replay records).
2. When a trace saved full tensors (e.g. the ``tiny`` preset): the element-wise effect of that choice,
   recomputed from the replay's own sum — normalise the unrounded sum and the rounded one.
3. float32: ``.float()`` and ``.to(float32)`` return the same tensor, so ``residual`` *is* ``x``
   and is normalised in place — which lines, what the trace saw, how far the output lands from HF.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from annotate.links import FileFacts
from annotate.pages.base import plots
from annotate.pages.base.plots import series
from annotate.pages.base.trace_set import TraceSet, TraceView
from annotate.pages.base.tracefmt import esc, num, sup_label
from annotate.trace.format.schema import LineRecord
from annotate.trace.format.store import ADD_RMS, Trace

NUMERICS_URI = "trace/numerics.md"
BANDWIDTH_SVG = "trace/bandwidth.svg"
LAYER_KEYS = (("attn", "Attn 增量 increment"), ("x", "x⁽ℓ⁾ residual"), ("rmsnorm1", "RMSNorm₁(x⁽ℓ⁾)"),
              ("x1", "x₁⁽ℓ⁾ residual"), ("rmsnorm2", "RMSNorm₂(x₁⁽ℓ⁾)"))
MANTISSA_BITS = {"bfloat16": 7, "float16": 10, "float32": 23}   # explicit bits of each format: eps = 2^-bits
Href = Callable[..., str]   # (file, line, *, layer=…, trace=…) -> a link; with layer it opens the values panel


@dataclass
class RoundingCall:
    """One call of add_rms_forward: the fp32 sum (before rounding) and the rounded residual, as recorded."""

    module: str
    layer: int | None
    sum_line: int
    round_line: int
    sum_norm: float
    round_norm: float
    sum_tensor: str | None
    round_tensor: str | None


def _lines(trace: Trace) -> tuple[int, int] | None:
    """(line of the fp32 sum, line that rounds it into `residual`) of add_rms_forward, from its statements."""
    info = trace.function(ADD_RMS)
    if not info:
        return None
    stmts = info["statements"]
    rnd = next((s for s in stmts if "residual" in s["targets"]), None)
    if rnd is None:
        return None
    before = [s for s in stmts if s["line"] < rnd["line"] and "x" in s["targets"]]
    return (before[-1]["line"], rnd["line"]) if before else None


def rounding_calls(trace: Trace) -> list[RoundingCall]:
    """Per replayed call: ‖fp32 sum‖ and ‖rounded residual‖ (and their tensor keys when saved)."""
    where = _lines(trace)
    if where is None:
        return []
    out = []
    sums = {(r.module, r.call): r for r in trace.records if r.function == ADD_RMS and r.line == where[0]}
    for r in (r for r in trace.records if r.function == ADD_RMS and r.line == where[1]):
        s: LineRecord | None = sums.get((r.module, r.call))
        sv, rv = (s.var("x") if s else None), r.var("residual")
        if sv and rv:
            out.append(RoundingCall(r.module or "", r.layer, where[0], where[1], sv.norm, rv.norm, sv.tensor, rv.tensor))
    return out


def norms64(trace: Trace, call: RoundingCall) -> tuple[float, float] | None:
    """(‖fp32 sum‖, ‖rounded residual‖) computed in float64 from the saved tensors, or None when the trace
    saved none. The recorded norms are float32 sums of squares, whose own rounding (≈ 2⁻²⁴ relative per add)
    is as large as the difference the table is about."""
    if not (call.sum_tensor and call.round_tensor):
        return None
    try:
        import torch

        s, r = trace.tensor(call.sum_tensor), trace.tensor(call.round_tensor)
    except KeyError:
        return None
    return (float(torch.linalg.vector_norm(s.double())), float(torch.linalg.vector_norm(r.double())))


def elementwise(trace: Trace, call: RoundingCall) -> tuple[int, int, int] | None:
    """(elements that differ, their max ulps, elements) between normalising the unrounded sum (nano-vllm)
    and the rounded residual (HF), both cast to the model dtype before γ — from the saved tensors."""
    if not (call.sum_tensor and call.round_tensor):
        return None
    try:
        import torch

        s, r = trace.tensor(call.sum_tensor).float(), trace.tensor(call.round_tensor)
    except KeyError:
        return None
    eps = float(trace.meta["model"]["config"].get("rms_norm_eps", 1e-6))
    dtype = r.dtype

    def norm(v: "torch.Tensor") -> "torch.Tensor":
        return (v * torch.rsqrt(v.pow(2).mean(dim=-1, keepdim=True) + eps)).to(dtype)

    a, b = norm(s), norm(r.float())
    ia, ib = (t.view(torch.int16).to(torch.int32) for t in (a, b))
    ordered = lambda i: torch.where(i < 0, -32768 - i, i)  # noqa: E731 - sign-magnitude -> ordered
    ulps = (ordered(ia) - ordered(ib)).abs()
    return int((ulps > 0).sum()), int(ulps.max()), a.numel()


def render(traces: TraceSet, href: Href, files: Mapping[str, FileFacts] | None = None) -> str:
    """The page's Markdown. ``files``: the build's vendored files (its snapshot); the vLLM section runs the
    bytes of vLLM's op file held there, and is left out without them."""
    out = ["---\ntitle: 数值 Numerics\n---\n", "# 数值：nano-vllm 与 HF transformers 的差别 — Numerics\n",
           "页面上的每个数都来自 `traces/` 里的轨迹（页面不手写数字）。Every number on this page is read from a trace "
           "under `traces/`; none is typed by hand.\n"]
    bf = traces.find(dtype="bfloat16") or traces.find(dtype="float16")
    if bf:
        out += [_section_rounding(bf, href), _section_elementwise(traces, href)]
    if files is not None:
        out.append(_section_vllm(files, traces, href))
    f32 = traces.find(dtype="float32")
    out.append(_section_f32(f32, bf, href) if f32 else
               "## float32\n\n没有 float32 轨迹 — no float32 trace under `traces/` (`make site` makes one).\n")
    out.append(_section_bandwidth(traces))
    return "\n".join(out)


def bandwidth_view(traces: TraceSet) -> TraceView | None:
    """The first shown trace with a GPU check's ``bandwidth.json`` beside it."""
    return next((v for v in traces.views if not v.pin_moved and v.trace.bandwidth()), None)


def plot_files(traces: TraceSet) -> dict[str, str]:
    """The page's plot files (site path -> SVG), one per colour scheme: the bandwidth plot when a trace has one."""
    view = bandwidth_view(traces)
    bw = view.trace.bandwidth() if view else None
    return plots.themed_files(BANDWIDTH_SVG, lambda theme: plots.bandwidth_svg(bw, theme)) if bw else {}


def _measured(view: TraceView) -> str | None:
    """The day the trace beside bandwidth.json was recorded (its meta's ``created``), or None."""
    created = str(view.trace.meta.get("created") or "")
    return created[:10] if re.match(r"\d{4}-\d\d-\d\d", created) else None


def _section_bandwidth(traces: TraceSet) -> str:
    """The GPU check's timing of add_rms_forward as a plot, and on which device and when it was measured."""
    head = "## 3. 融合内核的带宽 — the fused kernel's bandwidth {#bandwidth}\n\n"
    view = bandwidth_view(traces)
    bw = view.trace.bandwidth() if view else None
    if view is None or bw is None:
        return (head + "没有轨迹带着 GPU 检查的 `bandwidth.json` — no trace here carries a GPU check's `bandwidth.json` "
                "(`scripts/gpu-check.sh` writes it beside the CUDA trace).\n")
    device, when = esc(bw.get("device_name") or bw.get("device")), _measured(view)
    frac, speed = bw.get("fraction_of_copy", {}), bw.get("fused_speedup_vs_eager")
    method = bw.get("method")
    m: dict[str, Any] = method if isinstance(method, dict) else {}
    zh_when, en_when = (f"，轨迹记录于 {when}", f", trace recorded {when}") if when else ("", "")
    fused, eager = frac.get("fused"), frac.get("eager")
    return (head +
            f"测量设备 Measured on: **{device}**（`traces/{esc(view.key)}/bandwidth.json`{zh_when}{en_when}）。"
            f"每次调用读写 {num(bw.get('bytes_moved'))} 字节（{num(bw.get('tokens'))} × {num(bw.get('hidden'))}，"
            f"{esc(bw.get('dtype'))}）；融合内核达到设备拷贝带宽的 {'—' if fused is None else f'{fused:.0%}'}，"
            f"逐行执行的函数体只有 {'—' if eager is None else f'{eager:.0%}'}，融合版快 ×{num(speed, 3)}。"
            f" Each call moves {num(bw.get('bytes_moved'))} bytes; the fused kernel reaches "
            f"{'—' if fused is None else f'{fused:.0%}'} of a device copy's bandwidth, the eager body "
            f"{'—' if eager is None else f'{eager:.0%}'}: fused is ×{num(speed, 3)} faster. "
            f"中位数 Median of {esc(m.get('repeats', '?'))} repeats × {esc(m.get('calls_per_repeat', '?'))} calls; "
            f"{esc(m.get('timer', '?'))}.\n\n"
            + plots.figure_html("bandwidth.svg", f"bandwidth of fused, eager and copy on {bw.get('device_name')}", 640,
                                *plots.bandwidth_title(bw, when)) + "\n")


def _section_rounding(view: TraceView, href: Href) -> str:
    t = view.trace
    where = _lines(t)

    def link(line: int) -> str:
        return f'<a href="{esc(href("nanovllm/layers/layernorm.py", line))}">layernorm.py:{line}</a>'

    intro = ("## 1. 归一化的是哪个和 — which sum is normalised\n\n"
             "两边都先把 $x$ 与残差在 fp32 里相加。nano-vllm 的 `add_rms_forward` 把这个 fp32 的和"
             f"（{link(where[0]) if where else ''}）留着去做 RMSNorm，只把它的 {esc(t.meta['dtype'])} 舍入版本存回 `residual`"
             f"（{link(where[1]) if where else ''}）；HF transformers 的 Qwen3 先得到舍入后的残差，再对它做 RMSNorm。"
             "两边舍入的是同一个和：只要相加的两项一致，残差就逐位相同，差别只出现在归一化输出上；差多少，下面的表是轨迹量出来的。\n\n"
             "Both add $x$ and the residual in fp32. nano-vllm's `add_rms_forward` keeps that *unrounded* fp32 sum "
             f"for the RMSNorm and only stores its {esc(t.meta['dtype'])} rounding in `residual`; HF transformers' Qwen3 "
             "normalises the *rounded* residual. Both round the same sum: whenever the two addends agree the residuals agree bit "
             "for bit, and only the normalised outputs differ — by how much, the tables below measure from the trace.\n\n"
             f"**Trace:** {esc(t.provenance())}\n")
    return intro + "\n" + _layer_table(t) + "\n" + _norm_table(t, href)


def _first_norm_words(t: Trace) -> str:
    """Why layer 0's RMSNorm₁ differs from HF although its input x⁽⁰⁾ is identical: the compiled (Inductor)
    rms_forward against its own eager replay, measured in this trace (not the attention backend)."""
    checks = [c for c in t.checks_for("RMSNorm.rms_forward")
              if c.get("layer") == 0 and (c.get("module") or "").endswith("input_layernorm")]
    outs = [o for c in checks for o in c["outputs"]]
    x0 = next((q for q in series(t, "x") if q.layer == 0), None)
    if not outs or x0 is None or x0.max_abs != 0:   # said only where the trace shows the input identical
        return ""
    differ, numel = sum(o["n_diff"] for o in outs), sum(o["numel"] for o in outs)
    return (f"第 0 层的 RMSNorm₁ 与注意力无关：它的输入 x⁽⁰⁾ 与 HF 逐位相同，差别来自编译版（Inductor）的 rms_forward —— "
            f"它与自己的 eager 重放相比有 {num(differ)} / {num(numel)} 个元素不同（见该行面板的“融合 vs eager”）。"
            f" Layer 0's RMSNorm₁ owes nothing to attention: its input x⁽⁰⁾ is bit-identical to HF's, and the gap comes "
            f"from the compiled (Inductor) rms_forward, which differs from its own eager replay in {num(differ)} of "
            f"{num(numel)} elements (see that line's panel, fused vs eager).")


def _layer_table(t: Trace) -> str:
    """Per layer: max |Δ| (ulps at scale) of each flow tensor against HF, from the identities."""
    cols = {key: {p.layer: p for p in series(t, key)} for key, _ in LAYER_KEYS}
    head = "".join(f"<th>{esc(name)}</th>" for _, name in LAYER_KEYS)
    rows = []
    for layer in t.layers():
        cells = []
        for key, _ in LAYER_KEYS:
            p = cols[key].get(layer)
            cells.append("<td>—</td>" if p is None else
                         f'<td title="L{p.line} {esc(p.var)}; element-wise max {num(p.max_ulps)} ulp">'
                         f"{num(p.max_abs)} ({num(p.scale_ulps, 3)} ulp)</td>")
        rows.append(f"<tr><td>{layer}</td>{''.join(cells)}</tr>")
    fv = t.summary.get("final_vs_hf") or {}
    return ("### 每层与 HF 的距离 Distance to HF per layer\n\n"
            "max |Δ|，括号里是以该张量最大值的 ulp 计的距离（逐元素的 max ulps 在鼠标提示里：零附近一个元素变号就会很大）。"
            "注意注意力那一列：本轨迹的注意力后端（"
            f"{esc(t.meta['attention'])}）与 HF 的 eager 注意力本身就有差别，它会沿残差流传下去。"
            " max |Δ|, in parentheses in ulps of the tensor's largest value (the element-wise max ulps is in the "
            "tooltip: one element changing sign near zero makes it huge). Note the attention column: this trace's "
            "attention backend already differs from HF's eager attention, and that difference travels down the "
            "residual stream. " + _first_norm_words(t) + "\n\n"
            f'<div class="an-table"><table><thead><tr><th>layer ℓ</th>{head}</tr></thead><tbody>{"".join(rows)}'
            f"</tbody></table></div>\n\n"
            f"最终输出 Final hidden states vs HF: max |Δ| = {num(fv.get('max_abs'))} "
            f"({num(fv.get('scale_ulps'), 3)} ulp), ‖Δ‖/‖ref‖ = {num(fv.get('rel'), 3)}, "
            f"{num(fv.get('n_diff'))} / {num(fv.get('numel'))} elements differ.\n")


def _norm_table(t: Trace, href: Href) -> str:
    """Inside add_rms_forward: ‖fp32 sum‖ vs ‖rounded residual‖ per call, in float64 from the saved tensors
    (replay records); a trace without tensors shows its recorded float32 norms and says they cannot resolve it."""
    calls = rounding_calls(t)
    if not calls:
        return ""
    eps = 2.0 ** -MANTISSA_BITS.get(t.meta["dtype"], 23)
    pairs = [(c, norms64(t, c)) for c in calls]
    exact = all(p is not None for _, p in pairs)
    rows = []
    for c, p in pairs:
        a, b = p if exact and p is not None else (c.sum_norm, c.round_norm)
        rows.append(f"<tr><td>{'—' if c.layer is None else c.layer}</td><td><code>{esc(c.module)}</code></td>"
                    f"<td>{num(a, 10)}</td><td>{num(b, 10)}</td><td>{num(abs(a - b) / a, 3)}</td></tr>")
    how = ("范数由保存的张量在 float64 里算出。 Norms computed in float64 from the saved tensors."
           if exact else
           "这条轨迹没有保存张量：表中是记录时在 float32 里求的范数，它自身的舍入误差与这里的差同一量级，相对差只能看数量级。"
           " This trace saved no tensors: these are the norms recorded in float32, whose own rounding is as large as "
           "the difference shown, so the relative difference is an order of magnitude at best.")
    return ("### 舍入改变了多少 RMS — how much rounding moves the RMS\n\n"
            "同一次调用里，fp32 的和与舍入后的残差的范数（也就是 RMS 的 √(H·T) 倍）几乎相同："
            f"相对差远小于 {esc(t.meta['dtype'])} 的机器精度 {num(eps, 3)}，所以大多数输出舍入到同一个值，"
            "只有恰好落在舍入边界附近的元素差一个 ulp。"
            " Within one call, the fp32 sum and the rounded residual have almost the same norm (√(H·T) × the RMS): "
            f"the relative difference is far below {esc(t.meta['dtype'])}'s epsilon {num(eps, 3)}, so most outputs "
            f"round to the same value and only elements near a rounding boundary move by one ulp. {how}\n\n"
            '<div class="an-table"><table><thead><tr><th>层 layer</th><th>调用 call</th><th>‖fp32 和 sum‖ (L'
            f"{calls[0].sum_line})</th><th>‖residual‖ (L{calls[0].round_line})</th><th>相对差 relative difference</th></tr>"
            f"</thead><tbody>{''.join(rows)}</tbody></table></div>\n")


def _section_elementwise(traces: TraceSet, href: Href) -> str:
    """Element-wise effect, recomputed from saved tensors of a bf16/fp16 trace (if one has them)."""
    view = next((v for v in traces.views if not v.pin_moved and v.trace.meta.get("tensors_saved")
                 and v.dtype in ("bfloat16", "float16")), None)
    head = "### 逐元素 Element by element\n\n"
    if view is None:
        return (head + "没有保存完整张量的 16 位轨迹 — no 16-bit trace with full tensors under `traces/`; "
                "`annotate trace --preset tiny` saves them.\n")
    rows = []
    for c in rounding_calls(view.trace):
        res = elementwise(view.trace, c)
        if res:
            rows.append(f"<tr><td>{'—' if c.layer is None else c.layer}</td><td><code>{esc(c.module)}</code></td>"
                        f"<td>{num(res[0])} / {num(res[2])}</td><td>{num(res[1])}</td></tr>")
    return (head + "用同一次调用里记录下来的 fp32 和，分别按两种做法归一化（未舍入的和 vs 舍入后的残差），"
            "在乘 γ 之前转回低精度，数一数有多少元素不同。"
            " From the fp32 sum each replayed call recorded, normalise it both ways (the unrounded sum, as nano-vllm "
            "does, vs the rounded residual, as HF does), cast to the model dtype before γ, and count the elements "
            f"that differ.\n\n**Trace:** {esc(view.trace.provenance())}\n\n"
            '<div class="an-table"><table><thead><tr><th>layer</th><th>call</th><th>elements that differ</th>'
            f'<th>max ulps</th></tr></thead><tbody>{"".join(rows)}</tbody></table></div>\n')


def _section_f32(view: TraceView, bf: TraceView | None, href: Href) -> str:
    """The float32 hazard: aliasing flags (lines linked), what the values show, identities lost, final output."""
    t = view.trace
    alias = [f for f in t.flags if f.get("kind") == "aliasing"]
    broken = [f for f in t.flags if f.get("kind") == "identity"]
    items = "".join(f"<li>{_lines_links(f, href)} — {esc(f['message'])}</li>" for f in alias)
    lost = "".join(f"<li>{_lines_links(f, href)} — {esc(f['message'])}</li>" for f in broken)
    out = ["## 2. float32 下的别名陷阱 — the float32 aliasing hazard\n",
           "在 float32 下，`x.float()` 和 `x.to(orig_dtype)` 不拷贝，直接返回同一个张量：`residual` 与 `x` 成了同一块内存，"
           "随后对 `x` 的原地归一化也改写了 `residual`。轨迹在每行之后克隆了值，所以能看到这件事发生。"
           " In float32, `x.float()` and `x.to(orig_dtype)` return the very same tensor, so `residual` *is* `x`, "
           "and the in-place normalisation of `x` also overwrites `residual`. The trace clones every value after "
           f"each line, so it sees this happen.\n\n**Trace:** {esc(t.provenance())}\n",
           _overwrites(t, href),
           f"### 别名 Aliasing found by the trace\n\n<ul>{items or '<li>none</li>'}</ul>\n",
           _inplace_table(view, href)]
    fv, bv = t.summary.get("final_vs_hf") or {}, (bf.trace.summary.get("final_vs_hf") or {}) if bf else {}
    out.append("### 后果 What breaks\n\n"
               f"<ul>{lost or '<li>none</li>'}</ul>\n\n"
               f"最终输出与 HF 的距离 Final hidden states vs HF: float32 max |Δ| = {num(fv.get('max_abs'))}, "
               f"‖Δ‖/‖ref‖ = {num(fv.get('rel'), 3)}"
               + (f"; {esc(bf.dtype if bf else '')} max |Δ| = {num(bv.get('max_abs'))}, ‖Δ‖/‖ref‖ = {num(bv.get('rel'), 3)}" if bv else "")
               + ". 更高的精度反而给出错误的结果 — the higher precision gives the wrong answer.\n")
    return "\n".join(out)


#: an in-place method called on `x` (or on `x.float()`, which is `x` itself in float32)
_IN_PLACE = re.compile(r"\bx(?:\.float\(\))?\.(?:mul|add)_\(")


def _overwrites(t: Trace, href: Href) -> str:
    """Where each compiled norm first writes into the caller's tensor in float32 (the statement, from the
    vendored file), and what the trace found `residual` to hold after the first norm of layer 0."""
    items = []
    for fn, zh, en in (("RMSNorm.rms_forward", "第 0 层的 input_layernorm：改写的是调用者的 hidden_states（也就是 residual）",
                        "layer 0's input_layernorm: it overwrites the caller's hidden_states, which residual also names"),
                       (ADD_RMS, "把和原地加进调用者的 hidden_states；residual = x.to(…) 也是同一个张量，随后被原地归一化",
                        "adds in place into the caller's hidden_states; residual = x.to(…) is the same tensor, then normalised in place")):
        info = t.function(fn) or {}
        st = next((st for st in info.get("statements", []) if _IN_PLACE.search(st.get("text", ""))), None)
        if st is None:
            continue
        link = f'<a href="{esc(href(info["file"], st["line"]))}">{esc(info["file"].rsplit("/", 1)[-1])}:{st["line"]}</a>'
        items.append(f"<li><code>{esc(fn.split('.')[-1])}</code>: {link} <code>{esc(st['text'])}</code> — {esc(zh)}. "
                     f"{esc(en)}.</li>")
    held = next(((r, v) for r in t.records if r.function == "Qwen3DecoderLayer.forward" and r.layer == 0
                 and r.source == "traced" and (v := r.var("residual")) is not None and v.matched
                 and v.matched["key"] == "rmsnorm1"), None)
    seen = ""
    if held:
        r, v = held
        seen = (f'\n\n轨迹显示 The trace shows: <a href="{esc(href(r.file, r.line, layer=0))}">qwen3.py:{r.line}</a> 之后 '
                f"after it, <code>residual</code> ≡ {esc(sup_label(v.label))}（‖·‖ {num(v.norm)}），不是 x⁽⁰⁾ — not x⁽⁰⁾.")
    if not items:
        return ""
    return ("### 两个函数都改写调用者的张量 — both functions overwrite the caller's tensor\n\n"
            f"<ul>{''.join(items)}</ul>{seen}\n")


def _inplace_table(view: TraceView, href: Href) -> str:
    """`residual`'s norm after each line of one add_rms_forward call: it changes on lines that only touch x.
    Each line links to its values panel at that call's layer, in this trace."""
    t = view.trace
    info = t.function(ADD_RMS)
    recs = [r for r in t.records if r.function == ADD_RMS and r.kind == "line"]
    if not info or not recs:
        return ""
    first = (recs[0].module, recs[0].call)
    call = [(r, v) for r in recs if (r.module, r.call) == first and (v := r.var("residual")) is not None]
    rows = "".join(
        f'<tr><td><a href="{esc(href(r.file, r.line, layer=r.layer, trace=view.key))}">L{r.line}</a></td>'
        f'<td><code>{esc(r.text)}</code></td>'
        f"<td>{num(v.norm)}</td><td>{esc(', '.join(v.same_memory) or '—')}</td>"
        f"<td>{esc(sup_label(v.label))}</td></tr>" for r, v in call)
    return ("### `residual` 逐行 — `residual` line by line\n\n"
            f"<code>{esc(first[0])}</code> 的一次调用：`residual` 在只写 `x` 的行上也变了。"
            f" One call (<code>{esc(first[0])}</code>): `residual` changes on lines that only write `x`.\n\n"
            '<div class="an-table"><table><thead><tr><th>line</th><th>statement</th><th>‖residual‖</th>'
            f'<th>same memory as</th><th>≡</th></tr></thead><tbody>{rows}</tbody></table></div>\n')


def _lines_links(flag: dict, href: Href) -> str:
    name = flag["file"].rsplit("/", 1)[-1]
    return ", ".join(f'<a href="{esc(href(flag["file"], ln))}">{esc(name)}:{ln}</a>' for ln in flag.get("lines", []))


#: a report about code that is not vendored (vLLM's CUDA C kernel): linked as a report, not stated as a fact
REPORT = "https://github.com/vllm-project/vllm/issues/52104"


def _vs_compiled(rows: list[Any]) -> str:
    """② vLLM's op with γ against the compiled calls' outputs (what the rest of the site shows), with counts."""
    both = [r for r in rows if r.compiled_out is not None and r.compiled_residual is not None]
    if not both:
        return ("② 未与编译输出比较：这条轨迹的 γ 无法重建（不是预设检查点）— (2) not compared with the compiled outputs: "
                "this trace's γ cannot be regenerated (not a preset checkpoint).")
    res = sum(r.compiled_residual.n_diff == 0 for r in both)
    out = sum(r.compiled_out.n_diff == 0 for r in both)
    differ = sum(r.compiled_out.n_diff for r in both)
    total = sum(r.compiled_out.numel for r in both)
    worst = max(r.compiled_out.max_ulps for r in both)
    return (f"② 带 γ、对编译版的输出（本站其余各处显示的值）：残差 {num(res)} / {num(len(both))} 次逐位相同；归一化输出 "
            f"{num(out)} / {num(len(both))} 次逐位相同，共 {num(differ)} / {num(total)} 个元素不同，最多 {num(worst)} ulp。"
            f" (2) With γ, against the compiled calls' outputs (what the rest of the site shows): residual bit-identical "
            f"in {num(res)} of {num(len(both))} calls; normalised output bit-identical in {num(out)} of {num(len(both))}, "
            f"{num(differ)} of {num(total)} elements differ, by up to {num(worst)} ulp.")


def _section_vllm(files: Mapping[str, FileFacts], traces: TraceSet, href: Href) -> str:
    """Which sum each path normalises, with vLLM's native op (the snapshot's bytes of it) run on a trace's
    recorded add_rms_forward inputs."""
    from annotate.trace.model.runtime import trace_weights
    from annotate.trace.identify.vllm_native import OPS_FILE, compare_trace

    head = ("### 三条路径各归一化哪个和 — which sum each path normalises\n\n"
            '<div class="an-table"><table><thead><tr><th>路径 path</th><th>归一化的和 normalises</th>'
            "<th>依据 evidence</th></tr></thead><tbody>")
    view = next((v for v in traces.views if not v.pin_moved and v.trace.meta.get("tensors_saved")
                 and v.dtype in ("bfloat16", "float16")), None)
    op_file = files.get(OPS_FILE)
    rows = (compare_trace(op_file.data, view.trace, trace_weights(view.trace.meta, view.trace.path))
            if view is not None and op_file is not None else [])
    same = sum(r.residual.n_diff == 0 and r.normalised.n_diff == 0 for r in rows)
    hf_diff = max((r.hf_normalised.max_ulps for r in rows), default=0)
    op = f'<a href="{esc(href(OPS_FILE, 1))}">ir/ops/layernorm.py</a>'
    measured = (f"在 {num(len(rows))} 次记录的调用上、以同样的输入运行。① 对 nano-vllm 的 eager 重放（乘 γ 之前）："
                f"{num(same)} 次逐位相同（残差与归一化输出）。"
                f" Run on the inputs of {num(len(rows))} recorded calls. (1) Against nano-vllm's eager replay (before γ): "
                f"{num(same)} bit-identical (residual and normalised output). " + _vs_compiled(rows)) if rows else (
        "没有保存完整张量的 16 位轨迹，未运行 — not run: no 16-bit trace with full tensors (`annotate trace --preset tiny`).")
    body = [
        ("nano-vllm <code>add_rms_forward</code>", "未舍入的 fp32 和 unrounded fp32 sum", "上表 the tables above"),
        ("HF transformers", "舍入后的残差 rounded residual (bf16 add)",
         f"同样的输入按 HF 的顺序：最多差 {num(hf_diff)} ulp — same inputs in HF's order: up to {num(hf_diff)} ulp"
         if rows else "—"),
        (f"vLLM 原生 native ({op})", "未舍入的 fp32 和 unrounded fp32 sum", measured),
        ("vLLM CUDA C 内核 kernel", "未验证 not verified here",
         "源码不在 wheel 里，也没有运行（需要 vLLM 的编译扩展与 GPU）— its source is not in the wheel and it was not "
         f'run (needs vLLM\'s compiled extension and a GPU). 他处的报告 Reported elsewhere: <a href="{REPORT}">vLLM '
         "issue #52104</a>（在另一个提交上提出，说它先舍入 filed at another commit: says it rounds first）"),
    ]
    table = "".join(f"<tr><td>{a}</td><td>{esc(b)}</td><td>{c}</td></tr>" for a, b, c in body)
    note = ("vLLM 的原生算子是纯 torch，在 CPU 上就能跑；它所在的 `layers/layernorm.py` 离不开 vLLM 的平台与自定义算子机制，"
            "所以这里直接执行 vendored 的算子文件，只把注册用的装饰器 `register_op` 换成原样返回函数的替身；不带 γ 调用"
            "与 nano-vllm 乘 γ 之前的 eager 重放比较（①），并带上该层的 γ（由预设检查点重建：轨迹不保存参数）"
            "与编译版实际返回的值比较（②）。"
            " vLLM's native op is plain torch and runs on the CPU; the `layers/layernorm.py` around it needs vLLM's "
            "platform and custom-op machinery, so the vendored op file is executed directly with only its registration "
            "decorator `register_op` stood in by one that returns the function. ① calls it without γ and compares with "
            "nano-vllm's eager replay before γ; ② calls it with the layer's γ (regenerated from the preset checkpoint: "
            "traces keep no parameters) and compares with what the compiled call returned.")
    trace = f"\n\n**Trace:** {esc(view.trace.provenance())}" if view is not None and rows else ""
    return head + table + "</tbody></table></div>\n\n" + note + trace + "\n"
