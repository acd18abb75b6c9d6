"""Small pure formatters shared by the trace panels and pages: labels, numbers, identities, bytes."""
from __future__ import annotations

import html
import re
from typing import Any, Iterable

_SUP = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")
_LAYER = re.compile(r"⁽([0-9-]+)⁾")
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


def delta(match: dict[str, Any]) -> str:
    """`max |Δ| = 0` or `max |Δ| = 0.07812 (2.5 ulp)`: one match's distance, in the coarser dtype."""
    if not match.get("max_abs"):
        return "max |Δ| = 0"
    return f"max |Δ| = {num(match['max_abs'])} ({num(match.get('scale_ulps'), 3)} ulp)"


def identity_text(identity: dict[str, Any]) -> str:
    """The math variable(s) a tensor equals, with the distance: `x₁⁽²⁾, max |Δ| = 0`."""
    status = identity.get("status")
    matches = identity.get("matches") or []
    if status == "match" and matches:
        return " = ".join(sup_label(m["label"]) for m in matches) + ", " + delta(matches[0])
    if status == "no match":
        near = identity.get("nearest")
        return "no match" + (f" (nearest {sup_label(near['label'])}, rel {num(near.get('rel'), 2)})" if near else "")
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


def esc(text: Any) -> str:
    return html.escape(str(text))
