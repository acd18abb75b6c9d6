"""A small typed decoder shared by the formats: every error names the file, the JSON path and what was expected.

Readers of the lock, trace.json, bandwidth.json and a checkpoint's config.json decode through
these helpers, so a wrong type is one line such as
``traces/cpu/trace.json: $.records[12].line: expected an integer, got "151"`` instead of a
traceback deep in a page generator. :func:`read_text` is the one text reader: a non-UTF-8 byte
is reported with the file and its byte offset.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, NoReturn, TypeVar

from annotate.errors import UserError

T = TypeVar("T")
_MISSING: Any = object()


def describe(value: Any) -> str:
    """A short rendering of a JSON value for messages (`"151"`, `null`, `a list`)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        text = json.dumps(value, ensure_ascii=False)
        return text if len(text) <= 40 else text[:37] + '…"'
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


@dataclass(frozen=True)
class At:
    """A place in a decoded document: the file and a JSON path (``$.records[12].line``)."""

    file: str
    path: str = "$"
    fix: str = ""

    def key(self, name: str) -> At:
        part = f".{name}" if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) else f"[{json.dumps(name)}]"
        return At(self.file, self.path + part, self.fix)

    def index(self, i: int) -> At:
        return At(self.file, f"{self.path}[{i}]", self.fix)

    def fail(self, expected: str, got: Any = _MISSING) -> NoReturn:
        if got is _MISSING:
            what = "missing" if expected == "a value" else f"missing; expected {expected}"
        else:
            what = f"expected {expected}, got {describe(got)}"
        raise UserError(f"{self.file}: {self.path}: {what}" + (f"; {self.fix}" if self.fix else ""))


def obj(value: Any, at: At) -> dict[str, Any]:
    if not isinstance(value, dict):
        at.fail("an object", value)
    return value


def array(value: Any, at: At) -> list[Any]:
    if not isinstance(value, list):
        at.fail("a list", value)
    return value


def string(value: Any, at: At, pattern: str | None = None, expected: str = "a string") -> str:
    if not isinstance(value, str) or (pattern is not None and not re.fullmatch(pattern, value)):
        at.fail(expected, value)
    return value


def integer(value: Any, at: At, minimum: int | None = None) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        at.fail("an integer", value)
    if minimum is not None and value < minimum:
        at.fail(f"an integer >= {minimum}", value)
    return value


def number(value: Any, at: At, finite: bool = False) -> float:
    """A JSON number (NaN/Infinity allowed unless ``finite``: a trace may record non-finite values)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        at.fail("a number", value)
    if finite and not math.isfinite(value):
        at.fail("a finite number", value)
    return float(value)


def boolean(value: Any, at: At) -> bool:
    if not isinstance(value, bool):
        at.fail("true or false", value)
    return value


def field(data: dict[str, Any], name: str, at: At, decode: Callable[[Any, At], T], default: Any = _MISSING) -> T:
    """``decode(data[name])`` with the path extended by ``name``; a missing key fails unless ``default``."""
    if name not in data:
        if default is _MISSING:
            at.key(name).fail(_expected_of(decode))
        return default
    return decode(data[name], at.key(name))


def list_of(decode: Callable[[Any, At], T]) -> Callable[[Any, At], list[T]]:
    return lambda value, at: [decode(v, at.index(i)) for i, v in enumerate(array(value, at))]


def dict_of(decode: Callable[[Any, At], T]) -> Callable[[Any, At], dict[str, T]]:
    return lambda value, at: {k: decode(v, at.key(k)) for k, v in obj(value, at).items()}


def _expected_of(decode: Callable) -> str:
    return {obj: "an object", array: "a list", string: "a string", integer: "an integer", number: "a number",
            boolean: "true or false"}.get(decode, "a value")


# ---------------------------------------------------------------- reading files

def read_text(path: Path, label: str | None = None, fix: str = "") -> str:
    """The UTF-8 text of ``path``; a byte that is not UTF-8 is one line with the file and its offset."""
    return utf8(read_bytes(path, label, fix), label or str(path), fix)


def read_bytes(path: Path, label: str | None = None, fix: str = "") -> bytes:
    """The bytes of ``path``; an unreadable file is one line naming it (``label``) with ``fix``."""
    try:
        return path.read_bytes()
    except OSError as exc:
        raise UserError(f"{label or path}: cannot read ({exc.strerror or exc})" + (f"; {fix}" if fix else "")) from None


def utf8(data: bytes, label: str, fix: str = "") -> str:
    """``data`` (read from ``label``) as UTF-8 text; a byte that is not UTF-8 is one line with its offset."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise UserError(f"{label}: byte {exc.start} (line {line}) is not UTF-8 (0x{data[exc.start]:02x}); "
                        "save the file as UTF-8" + (f" or {fix}" if fix else "")) from None


def read_json(path: Path, label: str | None = None, fix: str = "") -> Any:
    """Parsed JSON of ``path``; invalid JSON is one line ``file:line:col: problem``."""
    name = label or str(path)
    text = read_text(path, name, fix)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"{name}:{exc.lineno}:{exc.colno}: invalid JSON ({exc.msg})" + (f"; {fix}" if fix else "")) from None
    except RecursionError:
        raise UserError(f"{name}: JSON nested too deeply" + (f"; {fix}" if fix else "")) from None
