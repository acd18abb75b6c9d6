"""Plots (annotate.pages.base.plots): the series come from the identities; SVG is deterministic and needs no font."""
from __future__ import annotations

import re

import pytest

from annotate.pages.base import plots
from annotate.pages.base.plots import DARK, LIGHT, drawn_once, figure_html, hf_diff_svg, norms_svg, series
from values_fixtures import mini


def test_series_follow_the_flow_identities() -> None:
    trace = mini()
    x1 = series(trace, "x1")
    assert [p.layer for p in x1] == trace.layers()
    for p in x1:   # x₁⁽ℓ⁾ is the residual after post_attention_layernorm, with that record's norm and distance
        rec = trace.record(p.record)
        assert (p.line, p.var) == (156, "residual") and p.norm == rec.var("residual").norm
        assert p.max_abs == rec.var("residual").matched["max_abs"]
    assert series(trace, "x2")[-1].var == "_"          # the last x₂ only exists inside Qwen3Model.norm
    norms = [p.norm for p in series(trace, "x")]
    assert norms == sorted(norms)                      # the residual stream grows


def test_svgs_are_deterministic_and_self_contained() -> None:
    trace = mini()
    for make in (norms_svg, hf_diff_svg):
        plots._DRAWN.clear()   # drawn here, not remembered from another test of this process
        a = make(trace)
        plots._DRAWN.clear()   # drawn again, not remembered
        b = make(trace)
        assert a == b and a.startswith("<svg")
        assert "<text" not in a and "@font-face" not in a and "<metadata" not in a
        assert not re.search(r'(href="|url\()(https?:)?//', a)


def test_a_plot_is_drawn_once_per_process_for_the_same_numbers(monkeypatch: pytest.MonkeyPatch) -> None:
    """`drawn_once` remembers an SVG by (plot, numbers, colours): the same numbers are not drawn again and give
    the same text as a fresh drawing; other numbers or the other scheme are drawn; the oldest goes first."""
    trace = mini()
    monkeypatch.setattr(plots, "_DRAWN", {})
    calls: list[str] = []
    real = plots._svg
    monkeypatch.setattr(plots, "_svg", lambda fig: calls.append("drawn") or real(fig))
    first = norms_svg(trace)
    assert norms_svg(trace) == first and len(calls) == 1
    norms_svg(trace, DARK)
    assert len(calls) == 2
    plots._DRAWN.clear()
    assert norms_svg(trace) == first and len(calls) == 3
    assert drawn_once("t", [1.0], LIGHT, lambda d, t: "a") == "a"
    assert drawn_once("t", [1.0], LIGHT, lambda d, t: "b") == "a"          # remembered by its numbers
    assert drawn_once("t", [2.0], LIGHT, lambda d, t: "c") == "c"          # other numbers: drawn
    monkeypatch.setattr(plots, "DRAWN_KEPT", 2)
    drawn_once("t", [3.0], LIGHT, lambda d, t: "d")
    assert len(plots._DRAWN) == 2 and drawn_once("t", [1.0], LIGHT, lambda d, t: "e") == "e"   # the oldest went


def _luminance(hex_colour: str) -> float:
    rgb = [int(hex_colour[i:i + 2], 16) / 255 for i in (1, 3, 5)]
    lin = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def _contrast(a: str, b: str) -> float:
    la, lb = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


def test_each_scheme_has_its_own_transparent_rendering() -> None:
    """No white box in dark mode: both renderings are transparent, and each draws its text and axes in a
    colour that reads on its scheme's page (>= 7:1), its lines >= 3:1."""
    trace = mini()
    for make in (norms_svg, hf_diff_svg):
        light, dark = make(trace, LIGHT), make(trace, DARK)
        assert light != dark
        for theme, svg in ((LIGHT, light), (DARK, dark)):
            fills = set(re.findall(r"fill: ?(#[0-9a-f]{6})", svg))
            for patch in ("patch_1", "patch_2"):                       # the figure's and the axes' background
                style = re.search(rf'<g id="{patch}">\s*<path[^>]*style="([^"]*)"', svg)
                assert style and style.group(1).startswith("fill: none"), (theme.name, patch)
            assert theme.fg in fills                                   # the text (paths) in the theme's colour
            assert _contrast(theme.fg, theme.page) >= 7
            assert all(_contrast(c, theme.page) >= 3 for c in theme.lines), theme
            other = DARK if theme is LIGHT else LIGHT
            assert other.fg not in fills


def test_a_figure_names_itself_in_chinese_then_english_and_escapes() -> None:
    html = figure_html("norms.svg", 'a "b" <c>', 640, "范数 <x>", "norm & more")
    assert '<img class="an-plot-light" src="norms.svg"' in html and 'src="norms-dark.svg"' in html
    assert "范数 &lt;x&gt;" in html and "norm &amp; more" in html and 'alt="a &quot;b&quot; &lt;c&gt;"' in html
    assert html.index("范数") < html.index("norm &amp;")
