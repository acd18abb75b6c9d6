"""Fixtures that build real things for the vendoring tests: project roots and git repositories.

Loaded with ``pytest_plugins`` from the test modules that need them (tests/conftest.py belongs to
the trace tests).
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from annotate.vendoring.lock import LOCK_NAME, VENDOR_DIR
from vendor_helpers import git

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def real_lock() -> dict:
    return json.loads((REPO / LOCK_NAME).read_text(encoding="utf-8"))


@pytest.fixture
def lock_project(tmp_path: Path, real_lock: dict) -> Path:
    """A temp project root with the real lock and, when present, the cached pinned wheel (offline)."""
    root = tmp_path / "project"
    (root / "vendor").mkdir(parents=True)
    (root / LOCK_NAME).write_text(json.dumps(real_lock), encoding="utf-8")
    cache = REPO / ".cache" / "wheels"
    if cache.is_dir():   # hard links where the file system allows (vLLM's wheel is 336 MB), else copies
        shutil.copytree(cache, root / ".cache" / "wheels", copy_function=_link_or_copy)
    return root


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


@pytest.fixture
def upstream_repo(tmp_path: Path) -> Path:
    """A real git repository whose first commit holds the vendored files (the registry copy)."""
    repo = tmp_path / "upstream"
    shutil.copytree(REPO / VENDOR_DIR, repo, ignore=shutil.ignore_patterns("__pycache__"))
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "registry copy")
    return repo
