"""The generated trace pages: overview (flow diagram + plots), fused kernels, numerics.

Independent of MkDocs like :mod:`annotate.pages.source.generate`: :func:`trace_pages` returns Markdown
pages and SVG files (docs-relative URI -> text); the plugin adds them to the build. Without any
trace each page says how to record one.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from annotate.links import FileFacts, page_url
from annotate.source import SourceFile
from annotate.pages.traces import flow
from annotate.pages.traces import kernels_page
from annotate.pages.traces import numerics_page
from annotate.pages.base import plots
from annotate.pages.traces import tp_page
from annotate.pages.base.trace_set import TraceSet, TraceView
from annotate.pages.base.tracefmt import esc, value_url

INDEX = "trace/index.md"
NORMS_SVG = "trace/norms.svg"
HF_SVG = "trace/hf-diff.svg"


@dataclass
class TracePages:
    """Markdown pages and other files (the plots, the kernels page's code scripts), both keyed by docs-relative URI."""

    pages: dict[str, str] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)


def _href(uri: str):
    """Links from the trace page `uri` to a line; with `layer` (and `trace`) they open its values panel there."""
    def href(file: str, line: int, **panel: object) -> str:
        return value_url(uri, file, line, **panel) if panel else page_url(uri, file, line)  # type: ignore[arg-type]
    return href


def trace_pages(traces: TraceSet, sources: Mapping[str, SourceFile], files: Mapping[str, FileFacts]) -> TracePages:
    """Every trace page for the traces found (each saying how to record one when there is none);
    ``sources`` are the build's parsed vendored files (the kernels page shows compiled bodies from them),
    ``files`` its vendored files as read (the numerics page runs vLLM's op from their bytes)."""
    out = TracePages()
    view = traces.find()
    if view is None:   # every page still exists (hand-written pages link to them) and says how to get a trace
        for uri, title in ((INDEX, "运行轨迹 Trace"), (kernels_page.KERNELS_URI, "融合内核 Fused kernels"),
                           (numerics_page.NUMERICS_URI, "数值 Numerics")):
            out.pages[uri] = _empty(traces, title)
        out.pages[tp_page.TP_URI] = tp_page.render(traces, _href(tp_page.TP_URI))
        return out
    out.files.update(plots.themed_files(NORMS_SVG, lambda theme: plots.norms_svg(view.trace, theme)))
    out.files.update(plots.themed_files(HF_SVG, lambda theme: plots.hf_diff_svg(view.trace, theme)))
    out.pages[INDEX] = overview(view, traces)
    # (each closed kernel's code is a file of its own, loaded when opened)
    out.pages[kernels_page.KERNELS_URI] = kernels_page.render(sources, traces, _href(kernels_page.KERNELS_URI),
                                                              out.files)
    out.pages[numerics_page.NUMERICS_URI] = numerics_page.render(traces, _href(numerics_page.NUMERICS_URI), files)
    out.files.update(numerics_page.plot_files(traces))
    out.pages[tp_page.TP_URI] = tp_page.render(traces, _href(tp_page.TP_URI))
    return out


def _empty(traces: TraceSet, title: str) -> str:
    stale = "".join(f"\n- {esc(w)}" for w in traces.warnings())
    return (f"---\ntitle: {title}\n---\n# {title}\n\n"
            "`traces/` 里没有可用的轨迹 — no usable trace under `traces/`: run `make site` "
            "(or `annotate trace`) to record one." + stale + "\n")


def _shown(piece: str) -> str:
    """A token's text as a reader can see it: spaces and line breaks made visible, then escaped."""
    return esc(piece.replace(" ", "␣").replace("\n", "↵").replace("\t", "⇥"))


def input_tokens(view: TraceView) -> str:
    """The run's input: each token's text with its id where a tokenizer cut the prompt (``meta.input.text``),
    else how the ids were made. A raw HTML block, so no token text is read as Markdown."""
    inp = view.trace.meta["input"]
    ids, texts, source = inp.get("ids") or [], inp.get("text"), str(inp.get("source", ""))
    head = "## 输入的词元 The input tokens\n\n"
    if not texts or len(texts) != len(ids):
        return (head + f"`traces/{esc(view.key)}` 的输入是 {len(ids)} 个词元 id（{esc(source)}），不是由分词器从文字切出的。"
                f" The input of `traces/{esc(view.key)}` is {len(ids)} token ids ({esc(source)}), not cut from text by a "
                "tokenizer.\n\n")
    chips = "".join(f'<span class="an-token"><code>{_shown(t)}</code><sub>{int(i)}</sub></span>'
                    for t, i in zip(texts, ids))
    return (head + f"`traces/{esc(view.key)}` 读入的是下面这段文字，由分词器切成 {len(ids)} 个词元"
            f"（{esc(source)}；每个词元下方是它的 id，␣ 是空格）。"
            f" `traces/{esc(view.key)}` read this text, cut by the tokenizer into {len(ids)} tokens "
            f"({esc(source)}; each token's id below it, ␣ a space).\n\n"
            f'<div class="an-tokens" lang="zh">{chips}</div>\n\n')


def overview(view: TraceView, traces: TraceSet) -> str:
    """Which traces the site shows, the flow diagram, the two plots."""
    svg = flow.render_svg(flow.extract(view.trace), lambda file, line, layer: value_url(INDEX, file, line, layer))
    listing = "\n".join(f"| `traces/{esc(v.key)}` | {esc(v.label)} | {esc(v.trace.provenance())} | "
                        f"{esc(v.status())} | {kernels_page.compile_evidence(v.trace)} |" for v in traces.views)
    return (
        "---\ntitle: 运行轨迹 Trace\n---\n# 运行轨迹：两个变量的流动 — the recorded run\n\n"
        "`annotate trace` 运行了真正的 nano-vllm（编译过的函数仍以编译版运行；每条轨迹凭什么这样说，见下表最后一列），"
        "记录每一行之后的张量，并与 HF transformers "
        "的 Qwen3 逐个比对，找出每个张量等于哪个数学变量。源码页上点击带 ▸ 的行即可看到这些值。"
        " `annotate trace` ran the real nano-vllm (compiled functions still compiled: the table's last column says "
        "what shows it for each trace), recorded the tensors after "
        "every line, and identified each one by comparing it with HF transformers' Qwen3. On the source pages, "
        "click a line marked ▸ to see them. See also [融合内核 Fused kernels](kernels.md) and "
        "[数值 Numerics](numerics.md).\n\n"
        "| 轨迹 trace | | 来源 provenance | 状态 status | 编译的证据 evidence it ran compiled |\n"
        "| --- | --- | --- | --- | --- |\n" + listing + "\n\n"
        + input_tokens(view) +
        "## 流程图 Flow diagram\n\n"
        f"由轨迹 `traces/{esc(view.key)}` 生成：两个相邻的解码层和 `Qwen3Model.norm`。每条边标出代码变量、轨迹识别出的数学变量"
        "和产生它的源码行（可点击）。左道是 `hidden_states`，右道是 `residual`；虚线表示这一步没有改变它。"
        " Generated from the trace: two consecutive decoder layers and `Qwen3Model.norm`. Each edge names the code "
        "variable, the math variable the trace identified it as, and the source line that produced it (linked). "
        "Dashed: the step leaves that variable alone.\n\n"
        f'<div class="an-figure an-flow-figure">{svg}</div>\n\n'
        "## 残差流的大小 Size of the residual stream\n\n"
        "nano-vllm 里被识别为 $x^{(\\ell)}$、$x_1^{(\\ell)}$、$x_2^{(\\ell)}$ 的张量的 L2 范数（所有 token 和通道）。"
        " L2 norm (all tokens and channels) of the nano-vllm tensors identified as $x^{(\\ell)}$, "
        "$x_1^{(\\ell)}$, $x_2^{(\\ell)}$.\n\n"
        + plots.figure_html("norms.svg", "norm of x, x1, x2 across layers", 640, *plots.norms_title(view.trace))
        + "\n\n"
        "## 与 HF transformers 的差别 Difference to HF transformers\n\n"
        "每层的残差（$x$、$x_1$）和归一化输出（RMSNorm₁、RMSNorm₂）与 HF 的距离：左图是以张量最大值的 ulp 计的 max |Δ|，"
        "右图是逐元素的最大 ulp（零附近变号会让它很大）。详见[数值](numerics.md)。"
        " Per layer, the residuals ($x$, $x_1$) and the normalised outputs (RMSNorm₁, RMSNorm₂) against HF: left, "
        "max |Δ| in ulps of the tensor's largest value; right, the element-wise max ulps (a sign flip near zero "
        "makes it large). See [Numerics](numerics.md).\n\n"
        + plots.figure_html("hf-diff.svg", "nano-vllm vs HF per layer, in ulps", 720, *plots.hf_diff_title(view.trace))
        + "\n")
