"""The generated trace pages (annotate.pages.traces.trace_pages): which pages and files, with and without traces."""
from __future__ import annotations

from annotate.pages.traces.trace_pages import HF_SVG, INDEX, NORMS_SVG, trace_pages
from annotate.pages.base.trace_set import TraceSet
from values_fixtures import mini_set, repo_files, repo_sources


def test_pages_and_plots_from_the_default_trace() -> None:
    out = trace_pages(mini_set("bf16", "f32"), repo_sources(), repo_files())
    assert set(out.pages) == {INDEX, "trace/kernels.md", "trace/numerics.md", "trace/tp.md"}
    plots = {f for f in out.files if not f.startswith("trace/kernels/")}   # (and the closed kernels' code scripts)
    assert plots == {NORMS_SVG, HF_SVG, "trace/norms-dark.svg", "trace/hf-diff-dark.svg"}
    assert [f for f in out.files if f.startswith("trace/kernels/")] and all(f.endswith(".js") for f in out.files
                                                                            if f.startswith("trace/kernels/"))
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


def test_the_input_tokens_are_shown_with_their_ids_and_escaped() -> None:
    from dataclasses import replace

    from annotate.pages.traces.trace_pages import input_tokens
    from annotate.pages.base.trace_set import TraceView

    view = mini_set("bf16").views[0]
    ids = view.trace.meta["input"]["ids"]
    assert "不是由分词器从文字切出的" in input_tokens(view) and f"{len(ids)} token ids" in input_tokens(view)
    texts = ["它", " <b>x</b>", "\n"] + ["a"] * (len(ids) - 3)
    trace = replace(view.trace, meta={**view.trace.meta, "input": {**view.trace.meta["input"], "text": texts,
                                                                 "source": "Qwen3 tokenizer"}})
    html = input_tokens(TraceView(view.key, trace))
    assert html.count('<span class="an-token">') == len(ids)
    assert "<code>它</code><sub>" in html and "&lt;b&gt;" in html and "<b>" not in html    # escaped, never markup
    assert "<code>␣&lt;b&gt;x&lt;/b&gt;</code>" in html and "<code>↵</code>" in html         # spaces made visible
    assert "Qwen3 tokenizer" in html and "词元" in html and "tokens" in html
    assert "<code>它</code><sub>" in trace_pages(TraceSet([TraceView(view.key, trace)]), repo_sources(),
                                                    repo_files()).pages[INDEX]
