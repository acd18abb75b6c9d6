"""Fixtures for the trace-values tests: the committed mini traces, goldens, and a site built with traces.

Loaded with ``pytest_plugins = ["values_fixtures"]``. The mini traces (tests/golden/values/*/trace.json,
see tests/trace_mini.py) keep goldens stable; the browser tests build a scratch project whose
``traces/`` holds the real traces of this checkout (from `make site`), or — when there are none —
the tiny traces the trace tests' session fixtures record (real compiled runs, bf16 and float32).
"""
from __future__ import annotations

import atexit
import functools
import json
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Mapping

import pytest

from annotate.links import FileFacts
from annotate.source import SourceFile
from annotate.pages.base.trace_set import TraceSet, TraceView
from annotate.trace.format.store import Trace, find_traces, load_trace
from goldens import GOLDEN, VENDOR
from once import once

if TYPE_CHECKING:
    from annotate.pages.base.snapshot import Snapshot

REPO = Path(__file__).resolve().parents[1]
MINI = GOLDEN / "values"


def _statement(file: str, line: int, end: int) -> str:
    """A statement's text from the vendored copy, white space normalised (as the trace records it)."""
    lines = (VENDOR / file).read_text(encoding="utf-8").splitlines()[line - 1:end]
    return " ".join(" ".join(lines).split())


@functools.lru_cache(maxsize=None)
def mini_dir(name: str = "bf16") -> Path:
    """A committed mini trace with its statement texts restored from the vendored copy, in a temp folder."""
    payload = json.loads((MINI / name / "trace.json").read_text(encoding="utf-8"))
    for r in payload["records"]:
        r["text"] = _statement(r["file"], r["line"], r["end_line"]) if r["kind"] == "line" else ""
    for f in payload["functions"]:
        for st in f["statements"]:
            st["text"] = _statement(f["file"], st["line"], st["end_line"])
    for f in payload["summary"]["flow"]:
        f["text"] = payload["records"][f["record"]]["text"]
    folder = Path(tempfile.mkdtemp(prefix="annotate-mini-"))
    atexit.register(shutil.rmtree, folder, True)   # (lru_cache: once per name and process; gone at exit)
    out = folder / name
    out.mkdir()
    (out / "trace.json").write_text(json.dumps(payload, ensure_ascii=False), encoding="utf-8")
    return out


def mini(name: str = "bf16") -> Trace:
    """A committed mini trace: `bf16` (traces/cpu cut down) or `f32` (the float32 one)."""
    return load_trace(mini_dir(name))


def mini_set(*names: str) -> TraceSet:
    """A TraceSet of mini traces keyed `cpu` (bf16) and `cpu-float32` (f32), nothing stale."""
    keys = {"bf16": "cpu", "f32": "cpu-float32"}
    return TraceSet([TraceView(keys[n], mini(n)) for n in names or ("bf16",)])


def href(file: str, line: int, layer: int | None = None, trace: str | None = None) -> str:
    """A link as the trace pages make it (annotate.pages.base.tracefmt.value_url when a layer is given)."""
    return (f"../source/{file}.html#L{line}" + ("" if layer is None else f"&layer={layer}")
            + ("" if trace is None else f"&trace={trace}"))


@pytest.fixture(scope="session")
def traced_project(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Path:
    """A scratch project with traces/: this checkout's traces when `make site` recorded them, else the
    tiny session traces, bf16 as ``cpu`` and float32 as ``cpu-float32`` — two, so that a clean clone
    running only `make test` (as CI does) still tests the trace switch — beside the committed ones."""
    from site_fixtures import copy_project_with_trace

    found = find_traces(REPO)

    def make(folder: Path) -> None:
        dest = folder / "project"
        if any(p.name == "cpu" for p in found):
            copy_project_with_trace(dest, *found)
            return
        # beside the committed device traces (traces/cuda…): a clean clone has them, not traces/cpu
        copy_project_with_trace(dest, request.getfixturevalue("tiny_trace").out, name="cpu",
                                named={"cpu-float32": request.getfixturevalue("tiny_trace_f32").out,
                                       **{committed.name: committed for committed in found}})

    return once(tmp_path_factory, "traced-project", make) / "project"


@pytest.fixture(scope="session")
def traced_site(traced_project: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The traced scratch project's site, built once per test run (strict)."""
    from annotate.cli.site import build_site

    once(tmp_path_factory, "traced-site", lambda _folder: build_site(traced_project, traced_project / "site", strict=True))
    return traced_project / "site"


@pytest.fixture(scope="session")
def tensor_trace(request: pytest.FixtureRequest) -> Trace:
    """A 16-bit trace with full tensors: `make site`'s tiny one under traces/, else the session's tiny trace."""
    for folder in find_traces(REPO):
        trace = load_trace(folder)
        if trace.meta.get("tensors_saved") and trace.meta["dtype"] in ("bfloat16", "float16"):
            return trace
    return request.getfixturevalue("tiny_trace").trace


@functools.cache
def repo_snapshot() -> Snapshot:
    """The project's build snapshot (built once per session)."""
    from annotate.pages.base.snapshot import build_snapshot

    return build_snapshot(REPO)


def repo_sources() -> Mapping[str, SourceFile]:
    """The project's parsed vendored files, as the build's snapshot holds them."""
    return repo_snapshot().sources


def repo_files() -> Mapping[str, FileFacts]:
    """The project's vendored files as the build's snapshot read them (bytes, parse, line map)."""
    return repo_snapshot().files
