"""What a computed claim is shown as, and how one fails: shared by the claims table and the diagrams.

:mod:`annotate.claims` (placeholders on pages) and :mod:`annotate.lesson.diagrams` (the element-level
diagrams' numbers) both format claim values and raise :class:`ClaimError`; both sit above this room, so
neither imports the other for it.
"""
from __future__ import annotations

from annotate.errors import UserError


class ClaimError(UserError):
    """A placeholder that cannot be parsed, names no claim, or whose claim no longer holds."""


def format_value(value: object, spec: str = "") -> str:
    """One line of text for a claim value; vectors as ``[a, b]``, matrices as ``[a, b]; [c, d]``."""
    if isinstance(value, list):
        if value and all(isinstance(v, list) for v in value):
            return "; ".join(format_value(v, spec) for v in value)
        return "[" + ", ".join(format_value(v, spec) for v in value) + "]"
    if spec:
        return format(value, spec)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        text = f"{value:.4f}".rstrip("0").rstrip(".")
        return "0" if text == "-0" else text
    return str(value)
