"""Plots of a trace, drawn with matplotlib into SVG at build time (text as paths: no fonts needed).

- :func:`norms_svg`: ‖x⁽ℓ⁾‖, ‖x₁⁽ℓ⁾‖, ‖x₂⁽ℓ⁾‖ across layers — the residual stream growing — taken from
  the nano-vllm tensors the trace identified as those math variables.
- :func:`hf_diff_svg`: nano-vllm vs HF transformers per layer for the residuals (x, x₁) and the
  normalised outputs (RMSNorm₁, RMSNorm₂): max |Δ| in ulps at the tensor's scale, and the
  element-wise max ulps (which a sign flip near zero makes huge), from the identities.

Both read the data through :func:`series`, which the numerics page shares. Every plot is drawn from a small
table of numbers alone, through :func:`drawn_once`, which draws each (plot, numbers, colours) once per process:
an `annotate serve` rebuild, or a second build in one process, redraws only a plot whose numbers changed
(matplotlib takes about a quarter of a second per SVG). Each plot is drawn twice, once
per colour scheme of the site (:data:`THEMES`: dark text on the light page, light text on the dark one),
on a transparent background; :func:`figure_html` shows the one that matches the page's scheme. Titles
and axis names are the page's (Chinese with English beside), not drawn into the SVG, whose text is paths
in a font without Chinese.
"""
from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import re
from dataclasses import dataclass
from typing import Any, Callable

from annotate.pages.base.tracefmt import esc
from annotate.trace.format.store import FLOW_FUNCTIONS, FLOW_NAMES, Trace

NORM_KEYS = (("x", "x⁽ℓ⁾"), ("x1", "x₁⁽ℓ⁾"), ("x2", "x₂⁽ℓ⁾"))
DIFF_KEYS = (("x", "residual x⁽ℓ⁾"), ("x1", "residual x₁⁽ℓ⁾"),
             ("rmsnorm1", "RMSNorm₁(x⁽ℓ⁾)"), ("rmsnorm2", "RMSNorm₂(x₁⁽ℓ⁾)"))


@dataclass
class Point:
    """One math variable of one layer, as nano-vllm's flow held it: which line, its norm, its distance to HF."""

    key: str
    layer: int
    record: int
    line: int
    var: str
    norm: float
    max_abs: float
    max_ulps: int
    scale_ulps: float


def _flow_match(trace: Trace, entry: dict[str, Any]) -> dict[str, Any] | None:
    """The first `matched_by` of a math variable that is a flow variable of the decoder/model forward."""
    for m in entry.get("matched_by", []):
        rec = trace.record(m["record"])
        if rec.function in FLOW_FUNCTIONS and rec.source == "traced" and m["var"] in FLOW_NAMES:
            return m
    return None


def series(trace: Trace, key: str) -> list[Point]:
    """Per layer, nano-vllm's tensor identified as math variable `key` (layers where none matched are left out)."""
    out = []
    for entry in (e for e in trace.math if e["key"] == key):
        m = _flow_match(trace, entry)
        if m is None:
            continue
        rec = trace.record(m["record"])
        var = rec.var(m["var"])
        out.append(Point(key, entry["layer"], rec.id, rec.line, m["var"], var.norm if var else float("nan"),
                         m["max_abs"], m["max_ulps"], m["scale_ulps"]))
    return sorted(out, key=lambda p: p.layer)


@dataclass(frozen=True)
class Theme:
    """Colours of one rendering of a plot: for the site's light (`default`) or dark (`slate`) scheme."""

    name: str
    suffix: str          # added to the file name: norms.svg, norms-dark.svg
    fg: str              # text, axes, ticks (>= 7:1 on `page`)
    page: str            # the scheme's page background, behind the transparent plot (legend box)
    lines: tuple[str, ...]


LIGHT = Theme("light", "", "#1f2328", "#ffffff", ("#1f62a8", "#b34f00", "#1e7b30", "#b3261e"))
DARK = Theme("dark", "-dark", "#e3e5ea", "#1e2129", ("#8ab4f8", "#ffb870", "#8fd19e", "#f6928a"))
THEMES = (LIGHT, DARK)


def themed_path(path: str, theme: Theme) -> str:
    """`trace/norms.svg` for the light theme, `trace/norms-dark.svg` for the dark one."""
    stem, dot, ext = path.rpartition(".")
    return f"{stem}{theme.suffix}{dot}{ext}"


def themed_files(path: str, draw: Callable[[Theme], str]) -> dict[str, str]:
    """Site path -> SVG text of one plot in every theme (what :func:`figure_html` refers to)."""
    return {themed_path(path, theme): draw(theme) for theme in THEMES}


def figure_html(src: str, alt: str, width: int, zh: str, en: str) -> str:
    """A plot's figure: the bilingual title, and one image per theme (CSS shows the page scheme's one)."""
    imgs = "".join(f'<img class="an-plot-{t.name}" src="{esc(themed_path(src, t))}" alt="{esc(alt)}" width="{width}">'
                   for t in THEMES)
    return (f'<figure class="an-figure an-plot"><figcaption class="an-plot-title">{esc(zh)} '
            f'<span lang="en">{esc(en)}</span></figcaption>{imgs}</figure>')


def _figure(theme: Theme = LIGHT, width: float = 6.4, height: float = 3.4, ncols: int = 1):
    """A new figure in ``theme``'s colours (Agg backend, text drawn as paths, fixed ids) and its axes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from cycler import cycler

    plt.rcParams.update({"svg.fonttype": "path", "svg.hashsalt": "annotate", "font.size": 9,
                         "text.color": theme.fg, "axes.labelcolor": theme.fg, "axes.edgecolor": theme.fg,
                         "xtick.color": theme.fg, "ytick.color": theme.fg, "grid.color": theme.fg,
                         "axes.facecolor": "none", "figure.facecolor": "none",
                         "legend.facecolor": theme.page, "legend.edgecolor": theme.fg,
                         "axes.prop_cycle": cycler(color=list(theme.lines))})
    return plt.subplots(1, ncols, figsize=(width, height), layout="constrained")


def _svg(fig) -> str:
    """The figure as SVG text on a transparent background, deterministic (no date, fixed ids), no XML prolog."""
    import matplotlib.pyplot as plt

    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None}, transparent=True)
    plt.close(fig)
    text = re.sub(r"\s*<metadata>.*?</metadata>", "", buf.getvalue(), flags=re.S)
    return text[text.index("<svg"):]


#: SVG text drawn in this process, by what it was drawn from (:func:`drawn_once`); the oldest goes first
_DRAWN: dict[str, str] = {}
DRAWN_KEPT = 64


def drawn_once(kind: str, data: Any, theme: Theme, draw: Callable[[Any, Theme], str]) -> str:
    """``draw(data, theme)``, drawn once per process for one (kind, data, theme). ``data`` is the
    plot's whole input, JSON-able numbers and names: `draw` sees nothing else, so the key cannot miss
    what changes the picture."""
    key = hashlib.sha256(json.dumps([kind, data, dataclasses.astuple(theme)]).encode("utf-8")).hexdigest()
    svg = _DRAWN.get(key)
    if svg is None:
        svg = draw(data, theme)
        while len(_DRAWN) >= DRAWN_KEPT:
            del _DRAWN[next(iter(_DRAWN))]
        _DRAWN[key] = svg
    return svg


def norms_svg(trace: Trace, theme: Theme = LIGHT) -> str:
    """‖x‖, ‖x₁‖, ‖x₂‖ per layer (L2 norm over all tokens and channels, float32); title on the page."""
    lines = [[[p.layer, p.norm] for p in series(trace, key)] for key, _ in NORM_KEYS]
    return drawn_once("norms", {"layers": trace.layers(), "lines": lines}, theme, _draw_norms)


def _draw_norms(data: dict[str, Any], theme: Theme) -> str:
    fig, ax = _figure(theme)
    for (_, name), marker, pts in zip(NORM_KEYS, "os^", data["lines"]):
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=marker, label=name)
    ax.set_xlabel("ℓ")
    ax.set_ylabel("‖·‖₂")
    ax.set_xticks(data["layers"])
    ax.grid(alpha=0.3)
    ax.legend()
    return _svg(fig)


def norms_title(trace: Trace) -> tuple[str, str]:
    """The norms plot's title, Chinese and English."""
    m = trace.meta
    where = f"{m['model']['name']}, {m['dtype']}, {m['input']['tokens']} tokens"
    return (f"残差流的范数 ‖·‖₂ 随层 ℓ 的变化（{m['model']['name']}，{m['dtype']}，{m['input']['tokens']} 个 token）",
            f"residual stream norm ‖·‖₂ across layers ℓ — {where}")


def hf_diff_svg(trace: Trace, theme: Theme = LIGHT) -> str:
    """nano-vllm vs HF per layer: max |Δ| in ulps at scale (left) and element-wise max ulps (right, log)."""
    lines = [[[p.layer, p.scale_ulps, p.max_ulps] for p in series(trace, key)] for key, _ in DIFF_KEYS]
    return drawn_once("hf-diff", {"layers": trace.layers(), "lines": lines}, theme, _draw_hf_diff)


def _draw_hf_diff(data: dict[str, Any], theme: Theme) -> str:
    fig, (left, right) = _figure(theme, 7.2, 3.4, ncols=2)
    for (_, name), marker, pts in zip(DIFF_KEYS, "osD^", data["lines"]):
        xs = [p[0] for p in pts]
        left.plot(xs, [p[1] for p in pts], marker=marker, label=name)
        right.plot(xs, [max(p[2], 0.5) for p in pts], marker=marker, label=name)
    left.set_title("(a)", fontsize=9)
    right.set_title("(b) log", fontsize=9)
    right.set_yscale("log")
    for ax in (left, right):
        ax.set_xlabel("ℓ")
        ax.set_xticks(data["layers"])
        ax.grid(alpha=0.3)
    left.set_ylabel("ulps")
    left.legend(fontsize=8)
    return _svg(fig)


def hf_diff_title(trace: Trace) -> tuple[str, str]:
    """The HF-difference plot's title, Chinese and English."""
    dtype = trace.meta["dtype"]
    return (f"nano-vllm 与 HF transformers 逐层之差（{dtype}）：(a) 以张量最大值的 ulp 计的 max |Δ|；(b) 逐元素最大 ulp（对数轴）",
            f"nano-vllm vs HF transformers per layer ({dtype}): (a) max |Δ| in ulps of the tensor's largest value; "
            "(b) element-wise max ulps (log)")


#: the three timings of bandwidth.json, in the order the plot draws them (top to bottom), with page words
BANDWIDTH_KINDS = (("fused", "融合内核 fused"), ("eager", "逐行函数体 eager body"), ("copy", "设备拷贝 device copy"))


def bandwidth_svg(bw: dict[str, Any], theme: Theme = LIGHT) -> str:
    """Achieved bandwidth of the fused add_rms_forward, its eager body and a device copy of the same bytes
    (bars, GB/s; each labelled with its median time per call), from a GPU check's ``bandwidth.json``."""
    gbps, med = bw.get("bandwidth_GBps", {}), bw.get("median_s", {})
    kinds = [k for k, _ in BANDWIDTH_KINDS if k in gbps][::-1]
    bars = [[k, float(gbps[k]), float(med[k]) if k in med else None] for k in kinds]
    return drawn_once("bandwidth", bars, theme, _draw_bandwidth)


def _draw_bandwidth(bars: list[list[Any]], theme: Theme) -> str:
    fig, ax = _figure(theme, 6.4, 2.2)
    values = [v for _, v, _ in bars]
    drawn_bars = ax.barh([k for k, _, _ in bars], values,
                         color=[theme.lines[i % len(theme.lines)] for i in range(len(bars))][::-1])
    ax.bar_label(drawn_bars, labels=[f"{m * 1e6:.1f} µs · {v:.0f} GB/s" if m is not None else f"{v:.0f} GB/s"
                                     for _, v, m in bars], padding=3, color=theme.fg)
    ax.set_xlabel("GB/s")
    ax.set_xlim(0, max(values, default=1) * 1.45)
    ax.grid(alpha=0.3, axis="x")
    return _svg(fig)


def bandwidth_title(bw: dict[str, Any], measured: str | None) -> tuple[str, str]:
    """The bandwidth plot's title, Chinese and English: what was timed, on which device and (when known) when."""
    device = bw.get("device_name") or bw.get("device") or "?"
    when = f"，{measured}" if measured else ""
    size = f"{bw.get('tokens')} × {bw.get('hidden')} {bw.get('dtype')}"
    return (f"RMSNorm.add_rms_forward 的实测带宽：融合内核、逐行函数体与同样字节数的设备拷贝（{device}{when}，{size}）",
            f"achieved bandwidth of RMSNorm.add_rms_forward: fused kernel, eager body and a device copy of the same "
            f"bytes — measured on {device}" + (f", {measured}" if measured else "") + f", {size}")
