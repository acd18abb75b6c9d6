"""Page paths, line anchors and pinned permalinks through the line map (a file's facts)."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from annotate.links import page_anchor, page_src_uri, relative
from annotate.pages.base.snapshot import build_snapshot

REPO = Path(__file__).resolve().parents[1]
PIN = "2f214426530e2841e7d24c73ee0dfa914d62df56"
BASE = f"https://github.com/GeeeekExplorer/nano-vllm/blob/{PIN}"


def test_page_paths_and_anchors() -> None:
    assert page_src_uri("nanovllm/models/qwen3.py") == "source/nanovllm/models/qwen3.py.md"
    assert page_anchor(36) == "#L36" and page_anchor(28, 40) == "#L28-L40" and page_anchor(5, 5) == "#L5"
    assert relative("lesson.md", "source/a.py.md") == "source/a.py.md"
    assert relative("ref/x.md", "source/a.py.md") == "../source/a.py.md"


def test_permalinks_follow_the_line_map() -> None:
    files = build_snapshot(REPO).files
    assert files["nanovllm/layers/layernorm.py"].permalink(36) == f"{BASE}/nanovllm/layers/layernorm.py#L36"
    qwen3 = files["nanovllm/models/qwen3.py"]
    # qwen3.py: local 204–217 have no upstream line; local 218 is upstream 204
    assert qwen3.permalink(218, 223) == f"{BASE}/nanovllm/models/qwen3.py#L204-L209"
    assert qwen3.permalink(204) is None and qwen3.upstream_line(204) is None and qwen3.upstream_line(218) == 204
    assert qwen3.permalink(203, 204) is None
    # a file the pinned upstream does not have: no permalink, no upstream line
    stray = replace(qwen3, path="nanovllm/not_upstream.py")
    assert stray.permalink(1) is None and stray.upstream_line(1) is None


def test_another_upstreams_lines_map_onto_its_own_pin() -> None:
    """HF's file is identical to its pin: every row has its upstream line (it used to ask nano-vllm's lock)."""
    hf = build_snapshot(REPO).files["transformers/models/qwen3/modeling_qwen3.py"]
    assert hf.owner == "transformers" and hf.status.state == "identical"
    assert all(hf.upstream_line(n) == n for n in range(1, len(hf.source.lines) + 1))
    assert hf.permalink(1, 3) == hf.lock.upstream.permalink(hf.path, 1, 3)
