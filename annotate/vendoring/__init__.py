"""Vendoring: lock I/O, sources (registry wheel, git), verification, the line map, atomic swap.

Public API for the rest of the package:

- :func:`read_lock` / :func:`write_lock` and the :class:`Lock` record,
- :func:`vendors` / :class:`Registry`: the upstreams (one lock each) and which one holds a path,
- :func:`sync` (materialise one upstream's folder; :func:`sync_all` every one) and :func:`status`,
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
from annotate.vendoring.registry import NANO_VLLM, Registry, Vendor, vendors
from annotate.vendoring.status import Status, status
from annotate.vendoring.sync import SyncResult, sync, sync_all


def line_map(root: Path, path: str, lock: Lock | None = None, upstream: Vendor | None = None) -> LineMap:
    """The line map of vendored file ``path`` (e.g. ``nanovllm/models/qwen3.py``) against its upstream's pin."""
    if upstream is None:
        upstream = Registry(root).owner(path) if lock is None else NANO_VLLM
    lock = lock or read_lock(root / upstream.lock_name)
    return linemap.build(path, (root / upstream.dir / path).read_bytes(), lock.upstream)


__all__ = ["LOCK_NAME", "NANO_VLLM", "VENDOR_DIR", "Lock", "LineMap", "Registry", "Source", "Status", "SyncResult",
           "Upstream", "UpstreamFile", "Vendor", "blob_id", "line_hashes", "line_map", "read_lock", "status", "sync",
           "sync_all", "vendors", "write_lock"]
