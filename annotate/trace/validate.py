"""Validation of a trace's files before anything reads them: trace.json, tensors.safetensors, bandwidth.json.

`annotate.trace.store` reads a trace through :func:`check_payload` and :func:`check_tensors`, so a
hand-edited or truncated trace is one line naming the file, the JSON path and what was expected
(``traces/cpu/trace.json: $.records[12].line: expected an integer, got "151"``), never a
traceback in a page generator. Only the fields the site reads are checked; the decoders are the
codec's (annotate/codec.py), shared with the lock and checkpoint configs. Statement text is not
checked here: pages take it from the vendored file.
"""
from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from annotate import codec
from annotate.errors import UserError
from annotate.vendoring.lock import VENDOR_DIR, safe_relative

TRACE_FIX = "regenerate it with `annotate trace --force`"
_str, _int, _num = codec.string, codec.integer, codec.number


def _opt(decode):
    return lambda v, at: None if v is None else decode(v, at)


def _item(**spec: Any):
    def run(value: Any, at: codec.At) -> dict[str, Any]:
        data = codec.obj(value, at)
        for key, decode in spec.items():
            if isinstance(decode, tuple):  # (decoder, default): an optional key
                codec.field(data, key, at, decode[0], decode[1])
            else:
                codec.field(data, key, at, decode)
        return data
    return run


_opt_int = _opt(_int)
_summary = _item(shape=codec.list_of(lambda v, a: _int(v, a, 0)), dtype=_str, norm=_opt(_num), mean=_opt(_num),
                 absmax=_opt(_num), head=codec.list_of(_opt(_num)))
_match = _item(key=_str, layer=_opt_int, label=_str, latex=_str)
_identity = _item(status=_str, matches=(codec.list_of(_match), []), runner_up=(_opt(_match), None),
                  margin=(_opt(_num), None), required=(_opt(_num), None))
_KERNEL = _item(function=_str, file=_str, line=_int, code=_str, kernels=codec.list_of(codec.obj),
                languages=(codec.list_of(_str), []))
_FUNCTION = _item(name=_str, file=_str, def_line=_int, kind=_str, statements=codec.list_of(codec.obj))
_MATH = _item(key=_str, layer=_opt_int, label=_str, latex=_str, summary=_summary, tensor=(_opt(_str), None),
              matched_by=(codec.list_of(codec.obj), []))
_CHECK = _item(function=_str, file=_str, line=_int, layer=_opt_int, call=_int, outputs=codec.list_of(codec.obj))


def _var(value: Any, at: codec.At) -> dict[str, Any]:
    var = codec.obj(value, at)
    codec.field(var, "name", at, _str)
    codec.field(var, "role", at, _str)
    codec.field(var, "shape", at, codec.list_of(lambda v, a: _int(v, a, 0)))
    codec.field(var, "dtype", at, _str)
    for key in ("norm", "mean", "absmax"):
        codec.field(var, key, at, _opt(_num))
    codec.field(var, "head", at, codec.list_of(_opt(_num)))
    codec.field(var, "tensor", at, _opt(_str), None)
    codec.field(var, "identity", at, _opt(_identity), None)
    for key in ("aliases", "same_memory"):
        codec.field(var, key, at, codec.list_of(_str), [])
    codec.field(var, "same_copy_as", at, _opt(codec.obj), None)
    return var


def _record(value: Any, at: codec.At) -> dict[str, Any]:
    rec = codec.obj(value, at)
    for key in ("id", "call", "hit", "order"):
        codec.field(rec, key, at, _int)
    line = codec.field(rec, "line", at, lambda v, a: _int(v, a, 1))
    codec.field(rec, "end_line", at, lambda v, a: _int(v, a, line))
    for key in ("function", "kind", "source"):
        codec.field(rec, key, at, _str)
    codec.field(rec, "file", at, safe_relative)
    codec.field(rec, "layer", at, _opt(_int))
    codec.field(rec, "module", at, _opt(_str))
    codec.field(rec, "vars", at, codec.list_of(_var))
    codec.field(rec, "aliases", at, codec.list_of(codec.obj), [])
    return rec


def _meta(value: Any, at: codec.At) -> dict[str, Any]:
    meta = codec.obj(value, at)
    for key in ("device", "device_name", "dtype", "created", "attention"):
        codec.field(meta, key, at, _str)
    model = codec.field(meta, "model", at, codec.obj)
    codec.field(model, "name", at.key("model"), _str)
    codec.field(model, "layers", at.key("model"), lambda v, a: _int(v, a, 1))
    inputs = codec.field(meta, "input", at, codec.obj)
    codec.field(inputs, "tokens", at.key("input"), lambda v, a: _int(v, a, 1))
    versions = codec.field(meta, "versions", at, codec.obj)
    codec.field(versions, "torch", at.key("versions"), _str)
    codec.field(meta, "tensors_saved", at, codec.boolean, False)
    return meta


def _vendor(value: Any, at: codec.At) -> dict[str, Any]:
    vendor = codec.obj(value, at)
    codec.field(vendor, "files", at, codec.dict_of(_str), {})
    # a format fact: a trace's vendor.root is the primary upstream's folder, nothing else
    codec.field(vendor, "root", at, lambda v, a: _str(v, a, re.escape(VENDOR_DIR), f'"{VENDOR_DIR}"'), None)
    return vendor


def check_payload(payload: dict[str, Any], path: Path) -> None:
    """Every field the site reads has its type; the first one that does not is one UserError line."""
    at = codec.At(str(path), fix=TRACE_FIX)
    codec.field(payload, "meta", at, _meta)
    codec.field(payload, "vendor", at, _vendor)
    codec.field(payload, "records", at, codec.list_of(_record))
    codec.field(payload, "math", at, codec.list_of(_MATH))
    for key, decode in (("functions", _FUNCTION), ("compiled_checks", _CHECK), ("kernels", _KERNEL),
                        ("flags", codec.obj)):
        codec.field(payload, key, at, codec.list_of(decode), [])
    codec.field(payload, "summary", at, codec.obj, {})


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
    to be `required` times as far (annotate/trace/reference.py MARGIN); a trace recorded before margins
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


def check_tensors(folder: Path, payload: dict[str, Any], name: str) -> None:
    """tensors.safetensors, when there: readable, and every `tensor` key of a variable in it with its shape."""
    path = folder / name
    if not path.exists():
        return
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(str(path), "pt", "cpu") as handle:
            shapes = {key: list(handle.get_slice(key).get_shape()) for key in handle.keys()}
    except (SafetensorError, OSError, ValueError, RuntimeError) as exc:
        raise UserError(f"{path}: truncated or not safetensors ({str(exc).splitlines()[0][:80]}); {TRACE_FIX}") from None
    for i, rec in enumerate(payload["records"]):
        for j, var in enumerate(rec["vars"]):
            key = var.get("tensor")
            if key is None:
                continue
            where = f"{path}: tensor {key!r} ($.records[{i}].vars[{j}])"
            if key not in shapes:
                raise UserError(f"{where}: missing from the file; {TRACE_FIX}")
            if shapes[key] != var["shape"]:
                raise UserError(f"{where}: shape {shapes[key]}, trace.json says {var['shape']}; {TRACE_FIX}")


def check_bandwidth(path: Path) -> dict[str, Any]:
    """bandwidth.json: valid UTF-8 JSON holding an object (its fields are read by the kernels page)."""
    return codec.obj(codec.read_json(path, fix="rerun scripts/gpu-check.sh"),
                     codec.At(str(path), fix="rerun scripts/gpu-check.sh"))
