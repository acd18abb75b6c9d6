"""Fixtures for the site tests: the real site built once per session, and scratch project copies.

Loaded with ``pytest_plugins = ["site_fixtures"]`` from the test modules that need them
(tests/conftest.py belongs to the trace tests).
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from annotate.cli.site import build_site
from annotate.vendoring import vendors
from once import once

REPO = Path(__file__).resolve().parents[1]
ARTIFACTS = REPO / "test-artifacts"


@pytest.fixture(scope="session")
def built_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real project's site, built once per test run (strict) into a temp folder (tests/once.py)."""
    return once(tmp_path_factory, "built-site", lambda folder: build_site(REPO, folder / "site", strict=True)) / "site"


def copy_project(dest: Path) -> Path:
    """A scratch copy of the project's site inputs: config, docs, notes, lock, vendor; KaTeX linked."""
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy2(REPO / "mkdocs.yml", dest / "mkdocs.yml")
    shutil.copytree(REPO / "docs", dest / "docs")
    shutil.copytree(REPO / "notes", dest / "notes")
    shutil.copytree(REPO / "map", dest / "map")
    (dest / "vendor").mkdir()
    for upstream in vendors(REPO):   # every upstream: its lock and its materialised folder
        shutil.copy2(REPO / upstream.lock_name, dest / upstream.lock_name)
        shutil.copytree(REPO / upstream.dir, dest / upstream.dir, ignore=shutil.ignore_patterns("__pycache__"))
    os.symlink(REPO / "node_modules", dest / "node_modules")
    for cached in (REPO / ".cache").glob("claims-*.json"):  # the lesson's computed numbers (keyed by vendor hashes)
        (dest / ".cache").mkdir(exist_ok=True)
        shutil.copy2(cached, dest / ".cache" / cached.name)
    return dest


def copy_project_with_trace(dest: Path, *trace_dirs: Path, name: str | None = None) -> Path:
    """:func:`copy_project` whose traces/ holds the given recorded traces (e.g. the session's tiny one).

    Each lands as ``traces/<its folder name>``; ``name`` renames a single trace (the tiny session trace
    is recorded elsewhere but read as ``traces/cpu`` by some tests).
    """
    if name is not None and len(trace_dirs) != 1:
        raise ValueError("copy_project_with_trace: name= renames exactly one trace")
    root = copy_project(dest)
    for trace_dir in trace_dirs:
        shutil.copytree(trace_dir, root / "traces" / (name or trace_dir.name))
    return root


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A scratch project root the test may edit (notes, docs, vendored files)."""
    return copy_project(tmp_path / "project")


@pytest.fixture(scope="session")
def artifacts() -> Path:
    """test-artifacts/ (git-ignored): screenshots kept for people to look at."""
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS
