"""The line map: local line -> upstream line by diffing per-line hashes."""
from __future__ import annotations

from pathlib import Path

from annotate.vendoring.linemap import LineMap, build, format_ranges, ranges
from annotate.vendoring.lock import LOCK_NAME, VENDOR_DIR, Lock, Upstream, UpstreamFile, read_lock

REPO = Path(__file__).resolve().parents[1]


def line_map(root: Path, path: str, lock: Lock | None = None) -> LineMap:
    """The line map of nano-vllm's vendored ``path`` under ``root`` against its lock's pin (``lock`` or the file's)."""
    lock = lock or read_lock(root / LOCK_NAME)
    return build(path, (root / VENDOR_DIR / path).read_bytes(), lock.upstream)


def test_ranges_collapse_runs() -> None:
    assert ranges([1, 2, 3, 7, 9, 10]) == [(1, 3), (7, 7), (9, 10)]
    assert format_ranges([(1, 3), (7, 7)]) == "1–3, 7"


def test_identical_file_maps_every_line_to_itself() -> None:
    lmap = line_map(REPO, "nanovllm/layers/layernorm.py")
    assert lmap.identical
    assert lmap.local_only() == []
    assert all(lmap.upstream_line(n) == n for n in range(1, lmap.local_lines + 1))


def test_qwen3_local_only_lines_and_shifted_tail() -> None:
    lmap = line_map(REPO, "nanovllm/models/qwen3.py")
    assert not lmap.identical
    assert lmap.local_only() == [(204, 217)]
    assert lmap.upstream_line(203) == 203
    assert lmap.upstream_line(210) is None
    # the 14 local-only lines shift everything after them
    assert lmap.upstream_line(218) == 204
    assert lmap.upstream_line(229) == 215
    assert lmap.upstream_span(145, 158) == (145, 158)
    assert lmap.upstream_span(200, 210) is None


def test_permalink_uses_upstream_lines_and_full_sha() -> None:
    lock = read_lock(REPO / LOCK_NAME)
    lmap = line_map(REPO, "nanovllm/models/qwen3.py", lock)
    a, b = lmap.upstream_span(218, 223)
    url = lock.upstream.permalink("nanovllm/models/qwen3.py", a, b)
    assert url == ("https://github.com/GeeeekExplorer/nano-vllm/blob/"
                   "2f214426530e2841e7d24c73ee0dfa914d62df56/nanovllm/models/qwen3.py#L204-L209")


def test_inserted_lines_are_local_only_and_later_lines_shift() -> None:
    upstream_text = b"a\nb\nc\n"
    up = Upstream("r", "c" * 40, "", "", {"f.py": UpstreamFile.of(upstream_text)})
    lmap = build("f.py", b"a\nNEW\nb\nc\n", up)
    assert lmap.local_only() == [(2, 2)]
    assert lmap.upstream_line(3) == 2 and lmap.upstream_line(4) == 3


def test_file_unknown_upstream_is_all_local() -> None:
    up = Upstream("r", "c" * 40, "", "", {})
    lmap = build("new.py", b"x = 1\ny = 2\n", up)
    assert lmap.local_only() == [(1, 2)] and not lmap.identical
