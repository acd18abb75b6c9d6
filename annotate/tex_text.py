"""A formula's TeX as plain Unicode text, for the search index: ``10^{-6}`` → ``10⁻⁶``, ``\\mathbb{R}^{F\\times H}``
→ ``ℝ^(F×H)``, ``x_1^{(\\ell)}`` → ``x₁⁽ℓ⁾``.

KaTeX's HTML, read as text, flattens a formula (``RF×H``, ``10−6``): the search index and its teasers
then show something that is not the formula. This is no TeX engine: commands it does not know keep
their name, and a script whose characters have no Unicode super/subscript is written ``^(…)`` / ``_(…)``.
"""
from __future__ import annotations

import re

SUPERSCRIPT = dict(zip("0123456789+-−=()niHFTLdhkx⊤",
                       "⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻⁻⁼⁽⁾ⁿⁱᴴᶠᵀᴸᵈʰᵏˣᵀ"))
SUBSCRIPT = dict(zip("0123456789+-−=()aeoxhklmnpstijruv", "₀₁₂₃₄₅₆₇₈₉₊₋₋₌₍₎ₐₑₒₓₕₖₗₘₙₚₛₜᵢⱼᵣᵤᵥ"))
#: spaced like KaTeX spaces relations (math-mode spaces in the TeX itself are dropped, as TeX drops them)
RELATIONS = set("=∈←→≈≤≥≡≠↦∼")
SYMBOLS = {
    "times": "×", "odot": "⊙", "cdot": "·", "in": "∈", "to": "→", "rightarrow": "→", "leftarrow": "←",
    "mapsto": "↦", "ell": "ℓ", "top": "⊤", "mid": "∣", "ldots": "…", "dots": "…", "cdots": "⋯", "le": "≤",
    "leq": "≤", "ge": "≥", "geq": "≥", "approx": "≈", "neq": "≠", "ne": "≠", "infty": "∞", "sum": "∑",
    "prod": "∏", "partial": "∂", "nabla": "∇", "emptyset": "∅", "varnothing": "∅", "equiv": "≡", "sim": "∼",
    "pm": "±", "lVert": "‖", "rVert": "‖", "Vert": "‖", "|": "‖", "langle": "⟨", "rangle": "⟩", "circ": "∘",
    "alpha": "α", "beta": "β", "gamma": "γ", "delta": "δ", "epsilon": "ε", "varepsilon": "ε", "theta": "θ",
    "lambda": "λ", "mu": "μ", "pi": "π", "sigma": "σ", "tau": "τ", "phi": "φ", "omega": "ω", "Delta": "Δ",
    "Sigma": "Σ", "Omega": "Ω", "quad": " ", "qquad": " ", ",": " ", ";": " ", ":": " ", "!": "", " ": " ",
    "{": "{", "}": "}", "%": "%", "_": "_", "#": "#", "&": "&",
}
BLACKBOARD = {"R": "ℝ", "N": "ℕ", "Z": "ℤ", "Q": "ℚ", "C": "ℂ"}
ACCENTS = {"tilde": "\u0303", "hat": "\u0302", "bar": "\u0304", "vec": "\u20d7", "dot": "\u0307"}
DROP = {"left", "right", "big", "Big", "bigg", "Bigg", "displaystyle", "textstyle", "limits", "nolimits"}
TEXTLIKE = {"mathrm", "operatorname", "mathit", "mathbf", "mathsf", "mathtt", "boldsymbol", "mathcal", "operatorname*"}
TEXT_MODE = {"text", "textrm", "textbf", "textit", "mbox"}   # their spaces are kept
_COMMAND = re.compile(r"\\([A-Za-z]+\*?|.)")


def tex_text(tex: str) -> str:
    """The formula as one line of Unicode text (white space collapsed)."""
    text, _ = _group(tex, 0, closing="")
    return re.sub(r"\s+", " ", text).strip()


def _group(tex: str, i: int, closing: str, text: bool = False) -> tuple[str, int]:
    """Read from ``i`` until ``closing`` (or the end): the text and the index after it. In math mode
    (``text`` false) the TeX's own spaces are dropped and relations are spaced."""
    out: list[str] = []
    while i < len(tex):
        ch = tex[i]
        if closing and ch == closing:
            return "".join(out), i + 1
        if ch.isspace() and not text:
            i += 1
        elif ch in RELATIONS and not text:
            out.append(f" {ch} ")
            i += 1
        elif ch == "{":
            inner, i = _group(tex, i + 1, "}", text)
            out.append(inner)
        elif ch in "^_":
            arg, i = _argument(tex, i + 1)
            out.append(_script(arg, SUPERSCRIPT if ch == "^" else SUBSCRIPT, ch))
        elif ch == "\\":
            piece, i = _command(tex, i)
            out.append(f" {piece} " if piece in RELATIONS else piece)
        elif ch == "~":
            out.append(" ")
            i += 1
        else:
            out.append(ch)
            i += 1
    return "".join(out), i


def _argument(tex: str, i: int) -> tuple[str, int]:
    """One argument: a braced group, a command, or one character."""
    while i < len(tex) and tex[i] == " ":
        i += 1
    if i >= len(tex):
        return "", i
    if tex[i] == "{":
        return _group(tex, i + 1, "}")
    if tex[i] == "\\":
        return _command(tex, i)
    return tex[i], i + 1


def _command(tex: str, i: int) -> tuple[str, int]:
    m = _COMMAND.match(tex, i)
    if not m:
        return "\\", i + 1
    name, i = m.group(1), m.end()
    if name in DROP:
        return "", i
    if name in TEXTLIKE:
        return _argument(tex, i)
    if name in TEXT_MODE:
        while i < len(tex) and tex[i] == " ":
            i += 1
        return _group(tex, i + 1, "}", text=True) if i < len(tex) and tex[i] == "{" else ("", i)
    if name == "mathbb":
        arg, i = _argument(tex, i)
        return "".join(BLACKBOARD.get(c, c) for c in arg), i
    if name in ACCENTS:
        arg, i = _argument(tex, i)
        return (arg + ACCENTS[name]) if len(arg) == 1 else arg, i
    if name == "sqrt":
        arg, i = _argument(tex, i)
        return f"√({arg})" if len(arg) > 1 else f"√{arg}", i
    if name in ("frac", "tfrac", "dfrac"):
        num, i = _argument(tex, i)
        den, i = _argument(tex, i)
        return f"{_wrap(num)}/{_wrap(den)}", i
    return SYMBOLS.get(name, name), i


def _wrap(part: str) -> str:
    return part if len(part) <= 1 or part.isalnum() else f"({part})"


def _script(arg: str, table: dict[str, str], mark: str) -> str:
    """Super/subscript characters when every character has one; else ``^(…)`` / ``_(…)``."""
    if arg and all(c in table for c in arg):
        return "".join(table[c] for c in arg)
    if len(arg) > 2 and arg[0] == "(" and arg[-1] == ")":   # a layer index: x⁽ℓ⁾, x₍ᵢ₎ around what has no script
        return f"{table['(']}{arg[1:-1]}{table[')']}"
    return f"{mark}({arg})" if len(arg) > 1 else f"{mark}{arg}"
