"""Plots of a trace, drawn with matplotlib into SVG at build time (text as paths: no fonts needed).

- :func:`norms_svg`: ‖x⁽ℓ⁾‖, ‖x₁⁽ℓ⁾‖, ‖x₂⁽ℓ⁾‖ across layers — the residual stream growing — taken from
  the nano-vllm tensors the trace identified as those math variables.
- :func:`hf_diff_svg`: nano-vllm vs HF transformers per layer for the residuals (x, x₁) and the
  normalised outputs (RMSNorm₁, RMSNorm₂): max |Δ| in ulps at the tensor's scale, and the
  element-wise max ulps (which a sign flip near zero makes huge), from the identities.

Both read the data through :func:`series`, which the numerics page shares.
"""
from __future__ import annotations

import io
import re
from dataclasses import dataclass
from typing import Any

from annotate.trace.store import FLOW_FUNCTIONS, FLOW_NAMES, Trace

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


def _figure(width: float = 6.4, height: float = 3.4, ncols: int = 1):
    """A new figure (Agg backend, text drawn as paths, fixed ids) and its axes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"svg.fonttype": "path", "svg.hashsalt": "annotate", "font.size": 9})
    return plt.subplots(1, ncols, figsize=(width, height), layout="constrained")


def _svg(fig) -> str:
    """The figure as SVG text, deterministic (no date, fixed ids), without the XML prolog."""
    import matplotlib.pyplot as plt

    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None}, facecolor="white")
    plt.close(fig)
    text = re.sub(r"\s*<metadata>.*?</metadata>", "", buf.getvalue(), flags=re.S)
    return text[text.index("<svg"):]


def norms_svg(trace: Trace) -> str:
    """‖x‖, ‖x₁‖, ‖x₂‖ per layer (L2 norm over all tokens and channels, float32)."""
    fig, ax = _figure()
    for (key, name), marker in zip(NORM_KEYS, "os^"):
        pts = series(trace, key)
        ax.plot([p.layer for p in pts], [p.norm for p in pts], marker=marker, label=name)
    ax.set_xlabel("layer ℓ")
    ax.set_ylabel("‖·‖₂")
    ax.set_xticks(trace.layers())
    ax.grid(alpha=0.3)
    ax.legend()
    ax.set_title(f"residual stream norm — {trace.meta['model']['name']}, {trace.meta['dtype']}, "
                 f"{trace.meta['input']['tokens']} tokens", fontsize=9)
    return _svg(fig)


def hf_diff_svg(trace: Trace) -> str:
    """nano-vllm vs HF per layer: max |Δ| in ulps at scale (left) and element-wise max ulps (right, log)."""
    fig, (left, right) = _figure(7.2, 3.4, ncols=2)
    for (key, name), marker in zip(DIFF_KEYS, "osD^"):
        pts = series(trace, key)
        xs = [p.layer for p in pts]
        left.plot(xs, [p.scale_ulps for p in pts], marker=marker, label=name)
        right.plot(xs, [max(p.max_ulps, 0.5) for p in pts], marker=marker, label=name)
    left.set_title("max |Δ| in ulps of the tensor's largest value", fontsize=9)
    right.set_title("element-wise max ulps (log)", fontsize=9)
    right.set_yscale("log")
    for ax in (left, right):
        ax.set_xlabel("layer ℓ")
        ax.set_xticks(trace.layers())
        ax.grid(alpha=0.3)
    left.set_ylabel("ulps")
    left.legend(fontsize=8)
    fig.suptitle(f"nano-vllm vs HF transformers — {trace.meta['dtype']}", fontsize=9)
    return _svg(fig)
