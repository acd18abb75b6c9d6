"""Vendoring: lock I/O, sources (registry wheel, git), verification, the line map, atomic swap.

Public API for the rest of the package:

- :func:`read_lock` / :func:`write_lock` and the :class:`Lock` record,
- :func:`sync` (materialise vendor/nano-vllm) and :func:`status` (what differs from upstream),
- :func:`line_map` (local line -> upstream line) for permalinks.
"""
from __future__ import annotations

from pathlib import Path

from annotate.vendoring import linemap
from annotate.vendoring.linemap import LineMap
from annotate.vendoring.lock import (
    LOCK_NAME,
    VENDOR_DIR,
    Lock,
    Source,
    Upstream,
    UpstreamFile,
    blob_id,
    line_hashes,
    read_lock,
    write_lock,
)
from annotate.vendoring.status import Status, status
from annotate.vendoring.sync import SyncResult, sync


def line_map(root: Path, path: str, lock: Lock | None = None) -> LineMap:
    """The line map of vendored file ``path`` (e.g. ``nanovllm/models/qwen3.py``) against the pin."""
    lock = lock or read_lock(root / LOCK_NAME)
    return linemap.build(path, (root / VENDOR_DIR / path).read_bytes(), lock.upstream)


__all__ = ["LOCK_NAME", "VENDOR_DIR", "Lock", "LineMap", "Source", "Status", "SyncResult", "Upstream",
           "UpstreamFile", "blob_id", "line_hashes", "line_map", "read_lock", "status", "sync", "write_lock"]
