"""Small pure formatters shared by the trace panels and pages: labels, numbers, identities, bytes."""
from __future__ import annotations

import html
import re
from typing import Any, Iterable, Mapping

from annotate.links import page_url

_SUP = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")
_LAYER = re.compile(r"⁽([0-9-]+)⁾")
ROLE_WORDS = {"assigned": "赋值 assigned", "argument": "参数 argument", "live": "当前值 live", "return": "返回 return"}
# the lesson's math variables in words (keys of annotate.trace.identify.reference.MATH_VARS)
MATH_WORDS = {
    "x": "该层的输入：残差流 x — input of the layer (residual stream)",
    "rmsnorm1": "注意力前的归一化 RMSNorm₁(x) — normalised input of attention",
    "attn": "注意力增量 — attention increment",
    "x1": "加上注意力增量后的残差流 x₁ — residual stream after attention",
    "rmsnorm2": "MLP 前的归一化 RMSNorm₂(x₁) — normalised input of the MLP",
    "mlp": "MLP 增量 — MLP increment",
    "x2": "上一层的输出 x₂，即本层的输入 x — the previous layer's output, i.e. this layer's input x",
    "final_norm": "最后的归一化 — final norm of the model",
    "ms1": "RMSNorm₁ 的均方 mean(x²)（乘 γ 之前的一步）— mean of squares inside RMSNorm₁",
    "xhat1": "归一化后、乘 γ 之前的 x/RMS(x) — x normalised, before γ (inside RMSNorm₁)",
    "ms2": "RMSNorm₂ 的均方 mean(x₁²) — mean of squares inside RMSNorm₂",
    "xhat2": "归一化后、乘 γ 之前的 x₁/RMS(x₁) — x₁ normalised, before γ (inside RMSNorm₂)",
    "msf": "最后归一化的均方 mean(x₂²) — mean of squares inside the final norm",
    "xhatf": "归一化后、乘 γ 之前的 x₂/RMS(x₂) — x₂ normalised, before γ (inside the final norm)",
}
NONE_KEY = "none"   # the layer key of records outside the decoder layers (Qwen3Model.forward, model.norm)
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4, "float64": 8, "int64": 8, "int32": 4, "bool": 1}


def sup_label(label: str) -> str:
    """The store's `x₁⁽2⁾` with the layer as real superscript digits: `x₁⁽²⁾`."""
    return _LAYER.sub(lambda m: f"⁽{m.group(1).translate(_SUP)}⁾", label)


def num(value: float | int | None, digits: int = 4) -> str:
    """A compact number: `0`, `0.07812`, `226.5`, `1.4e-05`; `—` for None, `nan`/`inf` as is."""
    if value is None:
        return "—"
    if isinstance(value, int) or float(value).is_integer() and abs(value) < 1e6:
        return str(int(value))
    return f"{value:.{digits}g}"


def math_words(key: str) -> str:
    """A lesson variable in words (Chinese first), e.g. `x1` -> "加上注意力增量后的残差流 x₁ — …"."""
    return MATH_WORDS.get(key, key)


def delta(match: dict[str, Any]) -> str:
    """`与 HF 差 max |Δ| = 0` or `… = 0.07812 (2.5 ulp)`: one match's distance, in the coarser dtype."""
    if not match.get("max_abs"):
        return "与 HF 差 max |Δ| = 0"
    return f"与 HF 差 max |Δ| = {num(match['max_abs'])} ({num(match.get('scale_ulps'), 3)} ulp)"


def margin_text(identity: Mapping[str, Any]) -> str:
    """Why a ≡ is unambiguous: `次近 runner-up x⁽⁰⁾ rel 0.75，裕度 margin 62（需 ≥ 4 required）`; "" when the
    trace stored no margin (format < 3) or there is no other candidate of that shape."""
    runner, margin = identity.get("runner_up"), identity.get("margin")
    if not runner or margin is None:
        return "仅此一个同形状候选 the only candidate of this shape" if "margin" in identity and not runner else ""
    return (f"次近 runner-up {sup_label(runner['label'])} rel {num(runner.get('rel'), 2)}，"
            f"裕度 margin {num(margin, 3)}（需 ≥ {num(identity.get('required'), 2)} required）")


def ambiguous_text(identity: Mapping[str, Any]) -> tuple[str, str]:
    """(short label, explanation) of an ambiguous identity: the candidates that cannot be told apart here."""
    matches = identity.get("matches") or []
    names = " | ".join(sup_label(m["label"]) for m in matches)
    rels = "，".join(f"{sup_label(m['label'])} rel {num(m.get('rel'), 2)}" for m in matches)
    return (f"无法区分 ambiguous: {names}",
            f"在此检查点上无法区分 indistinguishable at this checkpoint: {rels}（容差 tolerance "
            f"{num(identity.get('tolerance'), 2)}；≡ 要求次近者远 {num(identity.get('required'), 2)} 倍 — a ≡ needs the "
            "runner-up that many times farther）。例如 token 的 RMS ≈ 1 时 x 与 x/RMS(x) 几乎相等 — e.g. when a "
            "token's RMS ≈ 1, x and x/RMS(x) are nearly equal.")


#: a "no match" names its nearest candidate only within this relative distance: past it the candidate is
#: unrelated (rel 1.1 from x₂⁽³⁾ says nothing about the tensor), and the words say no match and no more
NEAREST_BOUND = 0.5


def nearest_shown(identity: Mapping[str, Any]) -> dict[str, Any] | None:
    """The nearest candidate of a "no match" worth naming: within :data:`NEAREST_BOUND` (relative), else None."""
    near = identity.get("nearest")
    rel = near.get("rel") if near else None
    return near if near and rel is not None and rel <= NEAREST_BOUND else None


def identity_text(identity: Mapping[str, Any]) -> str:
    """The math variable(s) a tensor equals, with the distance: `x₁⁽²⁾, max |Δ| = 0`."""
    status = identity.get("status")
    matches = identity.get("matches") or []
    if status == "match" and matches:
        return " = ".join(sup_label(m["label"]) for m in matches) + ", " + delta(matches[0])
    if status == "ambiguous":
        return ambiguous_text(identity)[0]
    if status == "no match":
        near = nearest_shown(identity)
        return "无匹配 no match" + (f"（最接近 nearest {sup_label(near['label'])}, rel {num(near.get('rel'), 2)}）"
                                   if near else "")
    return "—"


def nbytes(shape: Iterable[int], dtype: str) -> int:
    """Bytes of a tensor with this shape and dtype (from the trace's summaries)."""
    n = 1
    for d in shape:
        n *= int(d)
    return n * DTYPE_BYTES.get(dtype, 4)


def human_bytes(n: float) -> str:
    """`64 KiB`, `1.3 MiB`, `512 B`."""
    for unit, size in (("GiB", 2 ** 30), ("MiB", 2 ** 20), ("KiB", 2 ** 10)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{int(n)} B"


def value_url(from_src_uri: str, path: str, line: int, layer: int | None = None, trace: str | None = None) -> str:
    """A link that opens the values panel of `line` at `layer` (and `trace`): `…/qwen3.py.html#L156&layer=2`.

    annotate.js reads the parameters after the line anchor; without script the link still lands on the line."""
    params = f"&layer={layer_key(layer)}" + (f"&trace={trace}" if trace else "")
    return page_url(from_src_uri, path, line) + params


def esc(text: Any) -> str:
    return html.escape(str(text))


def layer_key(layer: int | None) -> str:
    """The key a layer goes by in the panels and placeholders: its number, or ``none`` outside the layers."""
    return NONE_KEY if layer is None else str(layer)


def layer_name(key: str) -> str:
    """A layer key in words, Chinese first: ``第 2 层 layer 2`` or ``层外 outside the layers``."""
    return "层外 outside the layers" if key == NONE_KEY else f"第 {key} 层 layer {key}"
