"""A formula's TeX as Unicode text for the search index (annotate.tex_text)."""
from __future__ import annotations

import pytest

from annotate.tex_text import tex_text


@pytest.mark.parametrize("tex, text", [
    (r"10^{-6}", "10⁻⁶"),
    (r"\mathbb{R}^{F\times H}", "ℝ^(F×H)"),
    (r"\gamma \in \mathbb{R}^{H}", "γ ∈ ℝᴴ"),
    (r"x_1^{(\ell)}", "x₁⁽ℓ⁾"),
    (r"x_2^{(L-1)}", "x₂⁽ᴸ⁻¹⁾"),
    (r"\tilde{x}_1 = \mathrm{RMSNorm}_2(x_1)", "x̃₁ = RMSNorm₂(x₁)"),
    (r"\operatorname{mean}(x^2)", "mean(x²)"),
    (r"q_j \leftarrow \text{RMSNorm}(q_j)\ \text{over the } d", "qⱼ ← RMSNorm(qⱼ) over the d"),
    (r"\frac{x}{\sqrt{\mathrm{mean}(x^2) + \varepsilon}}", "x/(√(mean(x²)+ε))"),
    (r"\left( a \right)", "(a)"),
    (r"\unknown{x}", "unknownx"),
    ("", ""),
])
def test_tex_as_text(tex: str, text: str) -> None:
    assert tex_text(tex) == text


def test_unbalanced_tex_does_not_raise() -> None:
    for tex in ("x^{", "\\", "{{", "}", "_", "\\frac{a}"):
        assert isinstance(tex_text(tex), str)
