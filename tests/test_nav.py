"""The generated nav: reading order, generated pages included, folders titled by their own names."""
from __future__ import annotations

from pathlib import Path

from annotate.pages.base.nav import nest, site_nav

pytest_plugins = ["site_fixtures"]

PAGES = ["writing.md", "trace-format.md", "updating.md", "values.md", "lesson.md", "index.md",
         "reference/glossary.md", "source/index.md", "source/nanovllm/llm.py.md",
         "source/nanovllm/layers/layernorm.py.md", "source/nanovllm/models/qwen3.py.md",
         "trace/index.md", "trace/kernels.md", "notes-for-me.md"]


def test_reading_order_and_sections() -> None:
    nav = site_nav(PAGES)
    assert nav[:2] == [{"首页 · Home": "index.md"}, "lesson.md"]
    titles = [next(iter(item)) if isinstance(item, dict) else item for item in nav]
    assert titles[2:] == ["源码 · Source", "运行值 · Trace", "速查 · Reference", "写作与维护 · Maintaining",
                          "notes-for-me.md"]
    assert nav[3] == {"运行值 · Trace": ["trace/index.md", "trace/kernels.md", "values.md"]}
    assert nav[5] == {"写作与维护 · Maintaining": ["writing.md", "updating.md", "trace-format.md"]}


def test_source_tree_keeps_folder_names() -> None:
    source = site_nav(PAGES)[2]["源码 · Source"]
    # the annotated files first, in the lesson's reading order (previous / next follow it), then the tree
    assert source == [{"精读 · Read first": ["source/nanovllm/models/qwen3.py.md", "source/nanovllm/layers/layernorm.py.md"]},
                      "source/index.md", {"nanovllm": ["source/nanovllm/llm.py.md"]}]


def test_nest_puts_pages_before_folders() -> None:
    assert nest(["a/b.md", "c.md", "a/d/e.md"]) == ["c.md", {"a": ["a/b.md", {"d": ["a/d/e.md"]}]}]


def test_built_site_sidebar_follows_the_order(built_site: Path) -> None:
    html = (built_site / "lesson.html").read_text(encoding="utf-8")
    positions = [html.find(t) for t in ("首页 · Home", "源码 · Source", "运行值 · Trace", "速查 · Reference",
                                        "写作与维护 · Maintaining")]
    assert -1 not in positions and positions == sorted(positions)
