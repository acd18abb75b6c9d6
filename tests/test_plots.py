"""Plots (annotate.pages.plots): the series come from the identities; SVG is deterministic and needs no font."""
from __future__ import annotations

import re

from annotate.pages.plots import hf_diff_svg, norms_svg, series
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
        a, b = make(trace), make(trace)
        assert a == b and a.startswith("<svg")
        assert "<text" not in a and "@font-face" not in a and "<metadata" not in a
        assert not re.search(r'(href="|url\()(https?:)?//', a)
