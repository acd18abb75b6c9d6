"""Checks of a trace's files beyond trace.json's model: tensors.safetensors, bandwidth.json, non-finite values.

trace.json itself is validated against the format's one model (annotate/trace/format/schema.py). What is
here needs more than the JSON: the tensor file's keys and shapes against the records, the GPU
check's bandwidth.json, and the strict build's refusal of NaN/infinite values (a valid trace of a
broken checkpoint). Each problem is one :class:`UserError` line naming the file and the fix.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping

from annotate import codec
from annotate.errors import UserError
from annotate.trace.format.schema import TRACE_FIX, LineRecord


def non_finite(trace: Any) -> str | None:
    """The first recorded value of a loaded trace that is NaN or infinite, as one line naming the line and
    variable (a strict build refuses it); else None."""
    for rec in trace.records:
        for var in rec.vars:
            values = [var.norm, var.mean, var.absmax, *var.head]
            if any(isinstance(x, float) and not math.isfinite(x) for x in values):
                return (f"{trace.path}: {rec.file}:{rec.line} (layer {rec.layer}) `{var.name}` holds NaN or infinite "
                        f"values; check the checkpoint, then {TRACE_FIX}")
    return None


def weak_identity(trace: Any) -> str | None:
    """The first ≡ a loaded trace claims without the margin it needs, as one line naming the line and
    variable (a strict build refuses it); else None. A ≡ needs its runner-up (the nearest other value)
    to be `required` times as far (annotate/trace/identify/reference.py MARGIN); a trace recorded before margins
    were stored (version < 3) cannot show that, so its ≡ are refused too. HF's traced lines
    (`summary.hf_lines`) are held to the same rule."""
    for rec in trace.records:
        for var in rec.vars:
            if problem := _weak(var.identity):
                return (f"{trace.path}: {rec.file}:{rec.line} (layer {rec.layer}) `{var.name}` ≡ "
                        f"{var.identity['matches'][0]['label']}: {problem}; {TRACE_FIX}")
    for entry in (trace.summary.get("hf_lines") or {}).get("lines", []):
        if entry.get("label") and (problem := _weak(entry)):
            return (f"{trace.path}: HF line {entry['line']} (layer {entry['layer']}) `{entry['var']}` ≡ {entry['label']}: "
                    f"{problem}; {TRACE_FIX}")
    return None


def _weak(identity: dict[str, Any]) -> str | None:
    """Why an identity's ≡ is not backed by its margin (None: it is, or it claims no ≡)."""
    if identity.get("status", "match") != "match" or ("matches" in identity and not identity["matches"]):
        return None
    margin, required = identity.get("margin", "unset"), identity.get("required")
    if margin == "unset" or required is None:
        return "recorded without an identification margin (trace format < 3)"
    if margin is not None and margin < required:
        return f"runner-up margin {margin:.3g} below the required {required:.3g}"
    return None


def check_tensors(folder: Path, records: list[LineRecord], name: str,
                  ranks: Mapping[int, list[LineRecord]] | None = None) -> None:
    """tensors.safetensors, when there: readable, and every `tensor` key of a variable in it with its
    shape, for rank 0's records and, in a --tp trace, every other rank's."""
    path = folder / name
    if not path.exists():
        return
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(str(path), "pt", "cpu") as handle:
            shapes = {key: list(handle.get_slice(key).get_shape()) for key in handle.keys()}
    except (SafetensorError, OSError, ValueError, RuntimeError) as exc:
        raise UserError(f"{path}: truncated or not safetensors ({str(exc).splitlines()[0][:80]}); {TRACE_FIX}") from None
    blocks = [("$.records", records)] + [(f"$.ranks[{n}].records", recs) for n, recs in enumerate((ranks or {}).values())]
    for block, recs in blocks:
        _check_keys(path, block, recs, shapes)


def _check_keys(path: Path, block: str, records: list[LineRecord], shapes: dict[str, list[int]]) -> None:
    """Every `tensor` key of the variables of ``records`` is in the file with its shape."""
    for i, rec in enumerate(records):
        for j, var in enumerate(rec.vars):
            key = var.tensor
            if key is None:
                continue
            where = f"{path}: tensor {key!r} ({block}[{i}].vars[{j}])"
            if key not in shapes:
                raise UserError(f"{where}: missing from the file; {TRACE_FIX}")
            if shapes[key] != var.shape:
                raise UserError(f"{where}: shape {shapes[key]}, trace.json says {var.shape}; {TRACE_FIX}")


def check_bandwidth(path: Path) -> dict[str, Any]:
    """bandwidth.json: valid UTF-8 JSON holding an object (its fields are read by the kernels page)."""
    return codec.obj(codec.read_json(path, fix="rerun scripts/gpu-check.sh"),
                     codec.At(str(path), fix="rerun scripts/gpu-check.sh"))
