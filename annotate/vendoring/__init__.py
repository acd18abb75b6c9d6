"""Vendoring: lock I/O, sources (registry wheel, git), verification, the line map, atomic swap.

Public API for the rest of the package:

- :func:`read_lock` / :func:`write_lock` and the :class:`Lock` record,
- :func:`vendors` / :class:`Registry`: the upstreams (one lock each) and which one holds a path,
- :func:`sync` (materialise one upstream's folder) and :func:`status`,
- :class:`LineMap` (local line -> upstream line, built by :func:`annotate.vendoring.linemap.build`) for permalinks.
"""
from __future__ import annotations

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
from annotate.vendoring.sync import SyncResult, sync

__all__ = ["LOCK_NAME", "NANO_VLLM", "VENDOR_DIR", "Lock", "LineMap", "Registry", "Source", "Status", "SyncResult",
           "Upstream", "UpstreamFile", "Vendor", "blob_id", "line_hashes", "read_lock", "status", "sync", "vendors",
           "write_lock"]
