"""The generated trace pages (annotate.pages.trace_pages): which pages and files, with and without traces."""
from __future__ import annotations

from annotate.pages.trace_pages import HF_SVG, INDEX, NORMS_SVG, trace_pages
from annotate.pages.trace_set import TraceSet
from values_fixtures import mini_set, repo_files, repo_sources


def test_pages_and_plots_from_the_default_trace() -> None:
    out = trace_pages(mini_set("bf16", "f32"), repo_sources(), repo_files())
    assert set(out.pages) == {INDEX, "trace/kernels.md", "trace/numerics.md", "trace/tp.md"}
    assert set(out.files) == {NORMS_SVG, HF_SVG, "trace/norms-dark.svg", "trace/hf-diff-dark.svg"}
    index = out.pages[INDEX]
    assert '<svg class="an-flow"' in index and 'src="norms.svg"' in index and 'src="hf-diff.svg"' in index
    assert 'src="norms-dark.svg"' in index and 'src="hf-diff-dark.svg"' in index   # one rendering per scheme
    assert "残差流的范数" in index and "residual stream norm" in index              # titles Chinese first, English beside
    assert "../source/nanovllm/models/qwen3.py.html#L156" in index
    assert "traces/cpu-float32" in index                      # every trace listed with its provenance
    assert "\n\n" not in index.split('<div class="an-figure an-flow-figure">')[1].split("</svg>")[0]


def test_without_traces_every_page_says_how_to_record_one() -> None:
    out = trace_pages(TraceSet(), repo_sources(), repo_files())
    assert set(out.pages) == {INDEX, "trace/kernels.md", "trace/numerics.md", "trace/tp.md"} and not out.files
    assert all("`annotate trace`" in text for text in out.pages.values())
