"""Server-side KaTeX: one node process, cached results, KaTeX's own error messages, local assets."""
from __future__ import annotations

from pathlib import Path

import pytest

from annotate.errors import UserError
from annotate.render.assets import SHIM_URI, site_assets
from annotate.render.katex import Katex, MathError, display_parts, katex_dir

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def katex():
    k = Katex(REPO)
    yield k
    k.close()


def test_renders_html_and_mathml(katex: Katex) -> None:
    out = katex.render(r"x_1 = x + \mathrm{Attn}(x)")
    assert out.startswith('<span class="katex">') and "<math" in out and 'class="katex-html"' in out
    assert 'class="katex-display"' in katex.render(r"\frac{a}{b}", display=True)


def test_results_are_cached_per_formula(katex: Katex) -> None:
    first = katex.render("a^2")
    katex.cache[("a^2", False)] = "cached"
    assert katex.render("a^2") == "cached" and first != "cached"


def test_bad_latex_gives_katex_message(katex: Katex) -> None:
    with pytest.raises(MathError, match=r"KaTeX parse error: Undefined control sequence: \\nope"):
        katex.render(r"\nope{x}")
    assert katex.check(r"\frac{a") is not None and katex.check("a+b") is None
    assert katex.render("b") .startswith("<span")  # the worker survives an error


def test_prefetch_renders_many_in_one_round_trip_and_keeps_errors(katex: Katex) -> None:
    katex.prefetch([("p_1", False), ("p_2", True), (r"\bad{", False), ("p_1", False)])
    assert ("p_1", False) in katex.cache and ("p_2", True) in katex.cache
    with pytest.raises(MathError, match="KaTeX parse error"):
        katex.render(r"\bad{")
    assert katex.render("p_1") == katex.cache[("p_1", False)]


def test_unicode_text_in_math_is_accepted(katex: Katex) -> None:
    assert "katex" in katex.render(r"\text{增量}")


def test_missing_install_is_one_line_with_the_fix(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"KaTeX is not installed; run `npm ci`"):
        katex_dir(tmp_path)


def test_site_assets_are_local_files() -> None:
    files = site_assets(REPO)
    assert files["assets/katex/katex.min.css"].is_file() and files[SHIM_URI].is_file()
    fonts = [uri for uri in files if uri.startswith("assets/katex/fonts/")]
    assert "assets/katex/fonts/KaTeX_Main-Regular.woff2" in fonts and all(f.endswith(".woff2") for f in fonts)


def test_side_by_side_statements_are_cut_at_their_top_level_gap() -> None:
    """`\\qquad` between two statements is where a phone may stack them; inside braces, `\\left…\\right`
    or an environment it is spacing and stays."""
    assert display_parts(r"f(x) = \frac{a}{b}, \qquad \gamma \in \mathbb{R}^{H}.") == [
        r"f(x) = \frac{a}{b},", r"\gamma \in \mathbb{R}^{H}."]
    for whole in (r"\left( a \qquad b \right)", r"\begin{aligned} a &\qquad b \end{aligned}", r"{a \qquad b}",
                  r"a \qquadx", r"a \qquad", r"a \leftarrow b"):
        assert display_parts(whole) == [whole], whole
    assert display_parts(r"a \leftarrow b \qquad c") == [r"a \leftarrow b", "c"]


def test_a_display_formula_of_two_statements_renders_as_two_that_wrap(katex: Katex) -> None:
    html = katex.render(r"y = x^2, \qquad x \in \mathbb{R}", display=True)
    assert html.startswith('<span class="an-math-parts">') and html.count('class="katex-display"') == 2
    assert katex.render(r"y = x^2", display=True).count('class="katex-display"') == 1
    with pytest.raises(MathError):                                  # a broken part: KaTeX's word on the whole
        katex.render(r"y = \nope, \qquad x", display=True)
