"""Atomic file and folder writes: write beside the target, then rename, so nothing is half-written.

This is the one home of the recipe every writer uses (the site, a trace, a vendored copy, a lock, a
cache file) and of the names it stages under, which :mod:`annotate.guard` sweeps after a killed run:

- ``.<name>.new-XXXX``: a file or folder being written (removed by a sweep: it may be half-written);
- ``.<name>.old-XXXX``: the previous folder, moved aside for the instant between a swap's two renames
  (put back by a sweep when ``<name>`` is missing, else removed);
- ``.<name>.tmp-XXXX`` folders and ``.<name>.XXXX.tmp`` files: what versions before 2026-12 staged
  under (removed by a sweep, like a new one).

What lands gets the modes an ordinary write would give it under the process's umask (``mkstemp`` and
``mkdtemp`` would leave 0600/0700: a site, trace or vendored copy only its writer could read).
"""
from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Callable, Iterator

NEW, OLD = "new", "old"
#: a staging name: ``.<name>.<kind>-XXXX``, or what versions before 2026-12 staged under (``kind`` ``tmp``
#: for a folder; a file was ``.<name>.XXXX.tmp``, mkstemp's random letters then ``.tmp``: no ``kind``)
STAGING = re.compile(r"^\.(?P<name>.+)\.(?:(?P<kind>new|tmp|old)-[^/]+|[a-z0-9_]+\.tmp)$")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _umask()
FILE_MODE = 0o666 & ~_UMASK
DIR_MODE = 0o777 & ~_UMASK


def staging_prefix(target: Path, kind: str = NEW) -> str:
    """The temp-name prefix of ``target``'s staged copy (``kind`` :data:`NEW`) or moved-aside one (:data:`OLD`)."""
    return f".{target.name}.{kind}-"


def stage_file(path: Path, data: bytes) -> Path:
    """Write ``data`` to a temp file beside ``path`` (same folder, so a later rename is atomic)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=staging_prefix(path), dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), FILE_MODE)
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


@contextlib.contextmanager
def replace_dir(target: Path, then: Callable[[], None] | None = None) -> Iterator[Path]:
    """Yield an empty staging folder beside ``target``; fill it in the ``with`` block.

    When the block ends normally the staged folder replaces ``target`` (:func:`swap_dir`, with
    ``then``); when it raises, ``target`` is untouched. Either way no staging folder is left behind.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    staged = Path(tempfile.mkdtemp(prefix=staging_prefix(target), dir=target.parent))
    try:
        os.chmod(staged, DIR_MODE)
        yield staged
        swap_dir(staged, target, then)
    finally:
        shutil.rmtree(staged, ignore_errors=True)


def swap_dir(staged: Path, target: Path, then: Callable[[], None] | None = None) -> None:
    """Replace folder ``target`` by ``staged`` (same parent) with renames; the old copy is removed last.

    ``then`` runs once the new folder is in place (e.g. renaming a staged lock file next to it);
    if it fails, the new folder goes back to ``staged`` and the old one is restored, so the two
    change together or not at all.
    """
    old = None
    if target.exists():
        old = Path(tempfile.mkdtemp(prefix=staging_prefix(target, OLD), dir=target.parent))
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
