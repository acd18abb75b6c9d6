"""A computed claim and the helpers that check it against an independent formula (no torch here)."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Union

Value = Union[bool, int, float, str, list]


@dataclass(frozen=True)
class Claim:
    """One named number (or vector, or short text) computed from the vendored code.

    ``problem`` is None while the claim holds; otherwise one line saying what the vendored code
    now gives and what the lesson's text expects.
    """

    name: str
    value: Value
    what: str
    problem: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"value": self.value, "what": self.what, "problem": self.problem}

    @staticmethod
    def from_json(name: str, data: dict[str, Any]) -> Claim:
        return Claim(name, data["value"], data.get("what", ""), data.get("problem"))


@dataclass
class Family:
    """Claims computed together; ``prefix`` owns every claim name starting with it."""

    prefix: str
    claims: list[Claim] = field(default_factory=list)

    def add(self, suffix: str, value: Value, what: str, problem: str | None = None) -> Claim:
        claim = Claim(f"{self.prefix}.{suffix}", value, what, problem)
        self.claims.append(claim)
        return claim


def short(value: Value) -> str:
    """A compact rendering for error messages: floats to 4 decimals, lists element-wise."""
    if isinstance(value, list):
        return "[" + ", ".join(short(v) for v in value) + "]"
    if isinstance(value, float):
        return f"{value:.4f}"
    return str(value)


def flat(value: Value) -> list[float]:
    """A number or a (nested) list of numbers as one flat list."""
    if isinstance(value, list):
        return [x for v in value for x in flat(v)]
    return [float(value)]


def mismatch(got: Value, want: Value, tol: float, source: str, formula: str) -> str | None:
    """None when ``got`` matches ``want`` element-wise within ``tol``; else a one-line problem."""
    a, b = flat(got), flat(want)
    if len(a) == len(b) and all(math.isclose(x, y, rel_tol=tol, abs_tol=tol) for x, y in zip(a, b)):
        return None
    return f"{source} gives {short(got)}, but {formula} gives {short(want)}"


def differs(got: Value, want: Value, source: str, expected: str) -> str | None:
    """None when ``got == want`` exactly (counts, shapes); else a one-line problem."""
    return None if got == want else f"{source} gives {short(got)}, but {expected} is {short(want)}"
