"""Session fixtures made once per test run, however many pytest-xdist workers run the suite.

`make test` runs the suite on two workers (pytest-xdist). A session fixture is per process, so each worker
would compile the tiny model, record the tiny traces and build the sites again. :func:`once` makes a
folder once per run instead: the first worker to ask makes it under a lock in the run's shared temp folder
(the parent of every worker's own), the others wait for it and read it. Without xdist it is the plain
session fixture it replaces.

Only folders are shared this way: each worker reads its own objects back from them. What a fixture leaves
there is read-only by convention, as it was when the session was one process.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
from pathlib import Path
from typing import Callable, Iterator

import pytest

#: the environment variable that moves :func:`machine_cache`
MACHINE_CACHE_ENV = "ANNOTATE_TEST_CACHE"


def machine_cache(name: str) -> Path:
    """``name``'s folder in the cache the suite keeps on this machine, across runs and across checkouts.

    Only what is keyed by everything it was made from lives there (Inductor's compiled code by its own keys,
    the lesson claims by their content key, the GPU rehearsal's image venv by its package versions), so a
    checkout of other code or inputs never reads another's: it makes its own beside it. A fresh clone then does not rebuild a 2 GB venv and
    recompute every claim its first run needs, as a second clone of any project reuses pip's and npm's
    caches. ``$ANNOTATE_TEST_CACHE`` (else ``$XDG_CACHE_HOME/annotate-tests``, else ``~/.cache/annotate-tests``);
    deleting it costs only time."""
    given = os.environ.get(MACHINE_CACHE_ENV)
    base = Path(given) if given else Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "annotate-tests"
    return base / name


def shared_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The temp folder every worker of this run shares (the worker's own base folder's parent under xdist)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """An exclusive lock on the file `path` (made if missing) for the block, across processes."""
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)   # released when the handle closes, or when a worker dies
        yield


def once(tmp_path_factory: pytest.TempPathFactory, name: str, make: Callable[[Path], None]) -> Path:
    """``root/name`` made by ``make(folder)`` the first time any worker of this run asks for it.

    A make that fails leaves no marker: the folder is removed and the next worker to ask tries again (and
    reports its own failure), so one worker's error never hands the others a half-made folder.
    """
    root = shared_root(tmp_path_factory)
    folder, done = root / name, root / f"{name}.done"
    with locked(root / f"{name}.lock"):
        if not done.is_file():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            try:
                make(folder)
            except BaseException:
                shutil.rmtree(folder, ignore_errors=True)
                raise
            done.touch()
    return folder
