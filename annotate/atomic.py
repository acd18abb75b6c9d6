"""Atomic file and folder writes: write beside the target, then rename, so nothing is half-written."""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable


def stage_file(path: Path, data: bytes) -> Path:
    """Write ``data`` to a temp file beside ``path`` (same folder, so a later rename is atomic)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return Path(tmp)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temp file in the same folder and an atomic rename."""
    tmp = stage_file(path, data)
    try:
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def swap_dir(staged: Path, target: Path, then: Callable[[], None] | None = None) -> None:
    """Replace folder ``target`` by ``staged`` (same parent) with renames; the old copy is removed last.

    ``then`` runs once the new folder is in place (e.g. renaming a staged lock file next to it);
    if it fails, the new folder goes back to ``staged`` and the old one is restored, so the two
    change together or not at all.
    """
    old = None
    if target.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old-", dir=target.parent))
        old.rmdir()
        os.replace(target, old)
    try:
        os.replace(staged, target)
        if then is not None:
            try:
                then()
            except BaseException:
                os.replace(target, staged)  # the caller removes it
                raise
    except BaseException:
        if old is not None:
            os.replace(old, target)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
