"""Page paths, line anchors and pinned permalinks through the line map."""
from __future__ import annotations

from pathlib import Path

from annotate.links import Links, page_anchor, page_src_uri, relative

REPO = Path(__file__).resolve().parents[1]
PIN = "2f214426530e2841e7d24c73ee0dfa914d62df56"
BASE = f"https://github.com/GeeeekExplorer/nano-vllm/blob/{PIN}"


def test_page_paths_and_anchors() -> None:
    assert page_src_uri("nanovllm/models/qwen3.py") == "source/nanovllm/models/qwen3.py.md"
    assert page_anchor(36) == "#L36" and page_anchor(28, 40) == "#L28-L40" and page_anchor(5, 5) == "#L5"
    assert relative("lesson.md", "source/a.py.md") == "source/a.py.md"
    assert relative("ref/x.md", "source/a.py.md") == "../source/a.py.md"


def test_permalinks_follow_the_line_map() -> None:
    links = Links(REPO)
    assert links.permalink("nanovllm/layers/layernorm.py", 36) == f"{BASE}/nanovllm/layers/layernorm.py#L36"
    # qwen3.py: local 204–217 have no upstream line; local 218 is upstream 204
    assert links.permalink("nanovllm/models/qwen3.py", 218, 223) == f"{BASE}/nanovllm/models/qwen3.py#L204-L209"
    assert links.permalink("nanovllm/models/qwen3.py", 204) is None
    assert links.permalink("nanovllm/models/qwen3.py", 203, 204) is None
    assert links.permalink("nanovllm/not_upstream.py", 1) is None
