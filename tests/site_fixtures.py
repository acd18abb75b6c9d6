"""Fixtures for the site tests: the real site built once per session, and scratch project copies.

Loaded with ``pytest_plugins = ["site_fixtures"]`` from the test modules that need them
(tests/conftest.py belongs to the trace tests).
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Mapping

import pytest

from annotate.cli.site import build_site
from annotate.vendoring import vendors
from once import machine_cache, once

REPO = Path(__file__).resolve().parents[1]
ARTIFACTS = REPO / "test-artifacts"


@pytest.fixture(scope="session")
def built_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real project's site, built once per test run (strict) into a temp folder (tests/once.py)."""
    return once(tmp_path_factory, "built-site", lambda folder: build_site(REPO, folder / "site", strict=True)) / "site"


#: the lesson's claims (annotate/lesson/cache.py) of the scratch projects, by cache key. The key covers the vendored
#: files, the claim code and the traces: a scratch copy without traces (or with the session's tiny one) has the same
#: key in every test, and this checkout's own claims (made with its traces) never match it, so every build of a
#: fresh copy computed them again in a child process (~7 s, dozens of builds a run). Content-addressed, so kept in
#: the machine's test cache (tests/once.py): a key is computed once per code version and inputs, whichever checkout
#: asks first (a fresh clone's first run used to compute every one of them again).
CLAIMS_STORE = machine_cache("claims")
CLAIMS_KEPT = 24


def seed_claims(root: Path) -> None:
    """Put the claims of `root`'s inputs into its cache: from :data:`CLAIMS_STORE`, else computed there first
    (under a lock: parallel workers compute a key once). An edit made after this changes the key, and that
    build computes its own, as the tool does."""
    from annotate.atomic import atomic_write_bytes
    from annotate.lesson import cache
    from once import locked

    key = cache.cache_key(root)
    name = cache.cache_path(root, key).name
    CLAIMS_STORE.mkdir(parents=True, exist_ok=True)
    stored = CLAIMS_STORE / name
    with locked(CLAIMS_STORE / "store.lock"):
        if cache.read_cached(stored) is None:
            cache.load_claims(root)
            atomic_write_bytes(stored, cache.cache_path(root, key).read_bytes())
            for old in sorted(CLAIMS_STORE.glob("claims-*.json"), key=lambda f: f.stat().st_mtime)[:-CLAIMS_KEPT]:
                old.unlink(missing_ok=True)
    target = cache.cache_path(root, key)
    if not target.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(stored, target)
    os.utime(stored)   # its last use, which the pruning above goes by


def copy_project(dest: Path, seed: bool = True) -> Path:
    """A scratch copy of the project's site inputs: config, docs, notes, lock, vendor; KaTeX linked; the lesson's
    claims for exactly these inputs in its cache (``seed``: :func:`seed_claims`)."""
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
    if seed:
        seed_claims(dest)
    return dest


def copy_project_with_trace(dest: Path, *trace_dirs: Path, name: str | None = None,
                            named: Mapping[str, Path] | None = None) -> Path:
    """:func:`copy_project` whose traces/ holds the given recorded traces (e.g. the session's tiny one).

    Each lands as ``traces/<its folder name>``; ``name`` renames a single trace (the tiny session trace
    is recorded elsewhere but read as ``traces/cpu`` by some tests); ``named`` adds more, each under its key
    (``{"cpu-float32": f32_trace}``). Every trace is in place before the lesson's claims are seeded (they are
    keyed by the traces): a trace copied in afterwards made the first build compute them again (~7 s).
    """
    if name is not None and len(trace_dirs) != 1:
        raise ValueError("copy_project_with_trace: name= renames exactly one trace")
    root = copy_project(dest, seed=False)
    for trace_dir in trace_dirs:
        shutil.copytree(trace_dir, root / "traces" / (name or trace_dir.name))
    for key, trace_dir in (named or {}).items():
        shutil.copytree(trace_dir, root / "traces" / key)
    seed_claims(root)   # keyed by the traces too
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
