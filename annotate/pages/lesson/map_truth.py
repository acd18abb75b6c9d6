"""The map's float32 statements, from the float32 trace: what it found, and the cells it contradicts.

The three-framework map (``map/decoder-block.yml``) states, per cell, which variable holds which math
value after a step. A cell marked ``dtype: both`` claims that for float32 too, and a ``float32:`` mapping
says what differs there (the variables it does not name keep their ``holds``). nano-vllm's float32 run
is the aliasing hazard (its ``.float()`` makes no copy), so hand-written float32 statements went wrong
(issue 34: "residual is the same tensor" where the trace's ``same_memory`` is empty). Here the float32
trace decides:

- :func:`held_after` reads what one variable held after one map line, call by call (identity by
  comparison, ``same_memory``, no match), for nano-vllm's traced lines and HF's recorded ones;
- :func:`contradictions` checks every float32 claim of the map against it; each contradiction is one line
  naming the map file, the step and cell, what the trace says and the fix (the strict build and
  ``annotate check --strict`` fail on them);
- :func:`float32_words` is what the map page shows for float32, generated from the trace.

Claims are read with a small vocabulary: a math symbol before any comment (``x⁽ℓ⁾ = x₂⁽ℓ⁻¹⁾``, ``a``,
``RMSNorm₁(x⁽ℓ⁾)``), ``no math variable``, ``the same tensor as NAME`` (or ``NAME is the same tensor``); a
claim outside it is not checked.
Without a float32 trace nothing is checked, and the page and ``check`` say so.
"""
from __future__ import annotations

import html
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from annotate.framework_map import MAP_FILE, MapCell, Row
from annotate.pages.base.tracefmt import num, sup_label
from annotate.pages.base.trace_set import TraceView
from annotate.trace.format.schema import VarRecord, identity_label
from annotate.vendoring.lock import sha256_bytes

#: the frameworks a trace records: nano-vllm's lines, and HF's lines recorded beside them (vLLM is not run)
TRACED_FRAMEWORKS = ("nano-vllm", "transformers")
#: math symbols of the map's claims (superscripts removed) -> the trace's math variable keys
CLAIM_SYMBOLS = {"x": "x", "x₁": "x1", "x₂": "x2", "a": "attn", "m": "mlp", "Attn(RMSNorm₁(x))": "attn",
           "MLP(RMSNorm₂(x₁))": "mlp", "RMSNorm₁(x)": "rmsnorm1", "RMSNorm₂(x₁)": "rmsnorm2",
           "RMSNorm_f(x₂)": "final_norm"}
_SUPERSCRIPT = re.compile(r"⁽[^⁾]*⁾")
#: where a claim's math ends: a comment in brackets, a comma, a semicolon, or the Chinese words after it
_MATH_END = re.compile(r"[，,;；（\u4e00-\u9fff]| \(")
_SAME = re.compile(r"same tensor as (\w+)|(\w+) is the same tensor")
_NONE = "no math variable"
#: a dtype named inside a claim made for both dtypes (`x₁ (bf16)` cannot hold in a float32 run)
_DTYPE = re.compile(r"\b(bf16|bfloat16|fp32|float32)\b")
NO_TRACE = ("没有 float32 轨迹：地图的 float32 陈述未经核对（`annotate trace --dtype float32` 录一条）— "
            "no float32 trace: the float32 statements of the map are not checked (record one with "
            "`annotate trace --dtype float32`)")


@dataclass(frozen=True)
class MapClaim:
    """What a cell's text says a variable holds: math variable keys, no math variable, same tensor as."""

    keys: frozenset[str]
    none: bool
    same: frozenset[str]


@dataclass(frozen=True)
class Call:
    """One recorded call of a map line: its layer, identity status, matched keys and label, nearest rel."""

    layer: int | None
    status: str            # match | ambiguous | no match | no candidate
    keys: frozenset[str]
    label: str
    rel: float | None      # the nearest math variable's relative distance (for "no match")


@dataclass(frozen=True)
class Held:
    """What one variable held after one map line, call by call; ``same`` the names that were the same
    tensor in every call (None: the trace does not record that, as for HF's lines)."""

    var: str
    calls: tuple[Call, ...]
    same: frozenset[str] | None


def claim_of(text: str) -> MapClaim:
    """Read a claim's text (see the module docstring for the vocabulary)."""
    head = _MATH_END.split(text, 1)[0]
    keys = {CLAIM_SYMBOLS[s] for alt in head.split("=") if (s := _SUPERSCRIPT.sub("", alt).strip()) in CLAIM_SYMBOLS}
    return MapClaim(frozenset(keys), _NONE in text, frozenset(a or b for a, b in _SAME.findall(text)))


def float32_claims(cell: MapCell) -> dict[str, str]:
    """The cell's statements about a float32 run: its ``holds`` when marked for both dtypes; with a
    ``float32`` mapping, that mapping over the ``holds`` it does not replace (they still stand); else none."""
    if cell.dtype == "both":
        return dict(cell.holds)
    return {**cell.holds, **cell.float32} if cell.float32 else {}


def _expand(key: str, layer: int | None, layers: int) -> set[str]:
    """x⁽ℓ⁾ is x₂⁽ℓ⁻¹⁾: a match of one also names the other (where that exists)."""
    if key == "x2" and layer is not None and layer + 1 < layers:
        return {"x2", "x"}
    if key == "x" and layer:
        return {"x", "x2"}
    return {key}


def _nano_call(rec_layer: int | None, var: VarRecord, layers: int) -> Call:
    identity = var.identity
    keys: set[str] = set()
    for m in identity.get("matches") or []:
        keys |= _expand(str(m["key"]), m.get("layer"), layers)
    nearest: Mapping[str, Any] = identity.get("nearest") or {}
    return Call(rec_layer, str(identity.get("status", "no candidate")), frozenset(keys), identity_label(identity),
                nearest.get("rel"))


def held_after(view: TraceView, path: str, line: int, var: str) -> Held | None:
    """What nano-vllm's ``var`` held after ``path:line`` in each recorded call of the trace (a name recorded
    only as another's ``same_memory`` shares that one's identity); None when no call recorded it."""
    trace = view.trace
    if not view.fresh_for(path):
        return None
    layers = int(trace.meta["model"]["layers"])
    calls, same = [], None
    for rec in trace.at(path, line):
        found = rec.var(var)
        names: set[str] = set(found.same_memory) if found else set()
        if found is None:
            found = next((v for v in rec.vars if var in v.same_memory), None)
            if found is None:
                continue
            names = {found.name, *found.same_memory} - {var}
        calls.append(_nano_call(rec.layer, found, layers))
        same = names if same is None else same & names
    return Held(var, tuple(calls), frozenset(same or ())) if calls else None


def _label_layer(label: str) -> int | None:
    """The layer of a label's first superscript (`x₂⁽0⁾` -> 0), None without one."""
    found = re.search(r"⁽(\d+)⁾", label)
    return int(found.group(1)) if found else None


def hf_held_after(hf: Mapping[str, Any], line: int, var: str, layers: int) -> Held | None:
    """What HF's ``var`` held after ``line`` (its recorded lines, ``summary.hf_lines``), per layer."""
    calls = []
    for e in hf.get("lines", []):
        if e.get("line") == line and e.get("var") == var:
            status = str(e.get("status") or "no candidate")
            key = str(e.get("identity") or "")
            layer = e.get("match_layer", _label_layer(str(e.get("label") or "")))   # older traces: from the label
            keys = _expand(key, layer, layers) if status == "match" and key else set()
            calls.append(Call(e.get("layer"), status, frozenset(keys), str(e.get("label") or ""), e.get("rel")))
    return Held(var, tuple(calls), None) if calls else None


def _layers(calls: Sequence[Call]) -> str:
    named = sorted({c.layer for c in calls if c.layer is not None})
    words = ", ".join(f"ℓ{n}" for n in named)
    return words + (" and outside the layers" if any(c.layer is None for c in calls) else "")


def rel_range(calls: Sequence[Call]) -> str:
    """`0.58–0.92` (or one number) over the calls' nearest distances; '' when none was recorded."""
    rels = [c.rel for c in calls if c.rel is not None]
    if not rels:
        return ""
    low, high = num(min(rels), 2), num(max(rels), 2)
    return low if low == high else f"{low}–{high}"


def _rels(calls: Sequence[Call]) -> str:
    rels = rel_range(calls)
    return f" (nearest rel {rels})" if rels else ""


def check_claim(text: str, held: Held, both: bool) -> list[str]:
    """What the trace says against one claim (English, for the check's one line); [] when it holds."""
    claim, out = claim_of(text), []
    if both and (m := _DTYPE.search(text)):
        out.append(f"the cell is marked for both dtypes but names {m.group(1)}")
    matched = [c for c in held.calls if c.status == "match"]
    if claim.none and matched:
        out.append(f"it matches {matched[0].label} in {_layers(matched)}")
    if claim.keys:
        lost = [c for c in held.calls if c.status == "no match"]
        if lost:
            out.append(f"no math variable matches in {_layers(lost)}{_rels(lost)}")
        other = [c for c in matched if not c.keys & claim.keys]
        if other:
            out.append(f"it is {other[0].label} in {_layers(other)}")
    if held.same is not None:
        missing = sorted(claim.same - held.same)
        if missing:
            said = ", ".join(sorted(held.same)) or "none"
            out.append(f"it is not the same tensor as {', '.join(missing)} (same_memory there: {said})")
    return out


@dataclass(frozen=True)
class Where:
    """Where a traced cell's statements are checked: the last anchor's file and line (the state after the step)."""

    path: str
    line: int


def cell_line(cell: MapCell, line_of: Callable[[Any], int | None]) -> Where | None:
    """The line after which the cell's ``holds`` are stated: its last anchor's resolved first line."""
    if not cell.anchors:
        return None
    line = line_of(cell.anchors[-1])
    return Where(cell.anchors[-1].path, line) if line else None


def _held(framework: str, view: TraceView, hf: Mapping[str, Any] | None, where: Where, var: str) -> Held | None:
    if framework == "nano-vllm":
        return held_after(view, where.path, where.line, var)
    if hf is not None and hf.get("file") == where.path:
        return hf_held_after(hf, where.line, var, int(view.trace.meta["model"]["layers"]))
    return None


def contradictions(rows: Sequence[Row], line_of: Callable[[Any], int | None], view: TraceView,
                   hf: Mapping[str, Any] | None) -> list[str]:
    """One line per map statement about float32 that the float32 trace ``view`` contradicts; ``hf`` is its
    HF line records when they were recorded from today's vendored HF file (else HF's cells go unchecked)."""
    out = []
    for row in rows:
        for framework in TRACED_FRAMEWORKS:
            cell = row.cells.get(framework)
            where = cell_line(cell, line_of) if cell else None
            if cell is None or where is None:
                continue
            for var, text in float32_claims(cell).items():
                held = _held(framework, view, hf, where, var)
                said = check_claim(text, held, cell.dtype == "both") if held else []
                if said:
                    key = "holds" if var not in cell.float32 else "float32"
                    out.append(f"{MAP_FILE}: {row.step} › {framework}: `{var}` = {text!r} in float32, but the float32 "
                               f"trace ({view.where}) at {where.path.rsplit('/', 1)[-1]}:{where.line} says "
                               f"{'; '.join(said)}; fix the cell's `{key}` in {MAP_FILE} to what the trace finds "
                               "(or mark the cell `dtype: bfloat16`)")
    return out


def hf_lines_today(view: TraceView, data: Callable[[str], bytes | None]) -> Mapping[str, Any] | None:
    """The float32 trace's HF line records when today's vendored HF file (``data(path)``) is the one they
    were recorded from, else None."""
    hf = view.trace.summary.get("hf_lines") or {}
    if not hf.get("lines"):
        return None
    today = data(str(hf.get("file", "")))
    return hf if today is not None and sha256_bytes(today) == hf.get("sha256") else None


# ---------------------------------------------------------------- the page's words

def _outcome_key(call: Call) -> tuple[str, str]:
    """A call's outcome without its layer: the status and the label with its superscripts removed."""
    return call.status, _SUPERSCRIPT.sub("", call.label)


def _group(calls: Sequence[Call]) -> list[list[Call]]:
    """Consecutive calls with one outcome (:func:`_outcome_key`) together."""
    groups: list[list[Call]] = []
    for c in calls:
        if groups and _outcome_key(groups[-1][-1]) == _outcome_key(c):
            groups[-1].append(c)
        else:
            groups.append([c])
    return groups


def _span(calls: Sequence[Call]) -> str:
    named = sorted({c.layer for c in calls if c.layer is not None})
    text = (f"ℓ{named[0]}" if len(named) == 1 else f"ℓ{named[0]}–{named[-1]}") if named else ""
    if any(c.layer is None for c in calls):
        text = (text + " · " if text else "") + "层外 outside"
    return text


def _outcome(calls: Sequence[Call]) -> str:
    first = calls[0]
    if first.status in ("match", "ambiguous"):
        labels = list(dict.fromkeys(c.label for c in calls))
        return html.escape(sup_label(labels[0] + (f" … {labels[-1]}" if len(labels) > 1 else "")))
    if first.status == "no match":
        rels = rel_range(calls)
        return "无匹配 no match" + (f"，最近 nearest rel {rels}" if rels else "")
    return "无同形状的数学变量 no math variable of that shape"


def describe_held(held: Held) -> str:
    """One variable's float32 facts for the page (HTML, Chinese first): per group of layers, the math
    variable it matched or "no match" with the nearest distance; then the names that were the same tensor."""
    parts = [f"{_span(g)}: {_outcome(g)}" for g in _group(held.calls)]
    if held.same:
        names = ", ".join(f"<code>{html.escape(n)}</code>" for n in sorted(held.same))
        parts.append(f"与 {names} 同一张量 the same tensor as {names}")
    return f"<code>{html.escape(held.var)}</code>: " + "；".join(parts)


def float32_words(cell: MapCell, framework: str, view: TraceView, hf: Mapping[str, Any] | None,
                  where: Where | None) -> str:
    """The cell's float32 line, generated from the float32 trace ('' when it recorded none of the
    cell's variables there, or the framework is not traced)."""
    if framework not in TRACED_FRAMEWORKS or where is None:
        return ""
    names = list(dict.fromkeys([*cell.holds, *cell.float32]))
    helds = [h for var in names if (h := _held(framework, view, hf, where, var)) is not None]
    if not helds:
        return ""
    return "；".join(describe_held(h) for h in helds)


def check_project(root: Path) -> tuple[list[str], str | None]:
    """``annotate check``'s part: (contradictions, a notice) for the project's map against its float32
    trace; the notice says why nothing was checked (no map, no float32 trace)."""
    from annotate.anchors import resolve
    from annotate.framework_map import load_map
    from annotate.notes import Sources
    from annotate.pages.base.trace_set import load_traces
    from annotate.vendoring.registry import Registry

    rows = load_map(root)
    if rows is None:
        return [], None
    registry = Registry(root)
    view = load_traces(root, registry.lock(registry.all[0]).upstream.commit).find(dtype="float32")
    if view is None:
        return [], NO_TRACE
    sources = Sources(root)

    def line_of(anchor: Any) -> int | None:
        res = resolve(anchor, sources.get(anchor.path))
        return res.span[0] if res.ok and res.span else None

    def data(path: str) -> bytes | None:
        file = registry.file(path) if path else None
        return file.read_bytes() if file is not None and file.is_file() else None

    return contradictions(rows, line_of, view, hf_lines_today(view, data)), None
