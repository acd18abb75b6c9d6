"""Session fixtures for the trace tests: ONE real compiled tiny trace per dtype, shared by all tests (and by
every xdist worker of a run: tests/once.py).

Each runs the real `annotate trace` command in-process (CLI → pipeline → real torch.compile on
CPU), so every trace test reads the same measured data instead of compiling again.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from once import machine_cache, once

ROOT = Path(__file__).resolve().parents[1]

#: Inductor's compiled-code cache for every trace this suite runs (in-process, and in the child processes, which
#: inherit it): in the machine's test cache (tests/once.py) rather than its default under the temp folder, which a
#: cleaned machine has lost. Its keys are Inductor's own (the graph, the torch version, the compiler), so a warm
#: entry is always the code a cold compile would make; cold, a tiny trace took 29.7 s, warm 13.9 s, and a run
#: compiles in dozens of processes. A TORCHINDUCTOR_CACHE_DIR already set is kept.
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(machine_cache("inductor")))


def pytest_configure(config: pytest.Config) -> None:
    """Ctrl-C handled as at a terminal, however the suite was started. A run launched in the background by a
    script (``nohup make test &`` from a non-interactive shell) inherits SIGINT *ignored* (POSIX: asynchronous
    lists without job control), and so would every child a test starts: the tests of what Ctrl-C does to a
    command (test_cli, test_serve) then failed for the launch's reason. A handled signal is reset to its default
    in a child, so each child Python installs its own KeyboardInterrupt handler again. A no-op when the suite
    was started from a terminal."""
    signal.signal(signal.SIGINT, signal.default_int_handler)


@dataclass
class TraceRun:
    """A finished `annotate trace` run: exit code, what it printed, the trace it wrote."""

    out: Path
    rc: int
    stdout: str
    stderr: str
    payload: dict[str, Any]
    trace: Any


def _need_vendor() -> None:
    if not (ROOT / "vendor" / "nano-vllm" / "nanovllm" / "models" / "qwen3.py").is_file():
        pytest.skip("vendor/nano-vllm is not materialised; run `annotate vendor sync`")


def run_cli(*argv: str) -> tuple[int, str, str]:
    """`annotate --root ROOT <argv>` in-process; returns (exit code, stdout, stderr)."""
    from annotate.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(["--root", str(ROOT), *argv])
    return rc, out.getvalue(), err.getvalue()


def _trace(tmp_path_factory: pytest.TempPathFactory, name: str, *extra: str) -> TraceRun:
    """The tiny trace `name`, recorded once per test run (tests/once.py); what the command printed is kept
    beside it, so that every worker reads the same run's output."""
    _need_vendor()
    from annotate.trace.format.store import load_trace

    def record(folder: Path) -> None:
        rc, stdout, stderr = run_cli("trace", "--preset", "tiny", "--out", str(folder / name), *extra)
        assert rc == 0, stderr
        (folder / "run.json").write_text(json.dumps({"rc": rc, "stdout": stdout, "stderr": stderr}), encoding="utf-8")

    folder = once(tmp_path_factory, f"trace-{name}", record)
    run = json.loads((folder / "run.json").read_text(encoding="utf-8"))
    out = folder / name
    payload = json.loads((out / "trace.json").read_text(encoding="utf-8"))
    return TraceRun(out, run["rc"], run["stdout"], run["stderr"], payload, load_trace(out))


@pytest.fixture(scope="session")
def tiny_trace(tmp_path_factory: pytest.TempPathFactory) -> TraceRun:
    """tiny preset, bfloat16, CPU, real torch.compile: the trace most tests read."""
    return _trace(tmp_path_factory, "cpu-bf16-tiny")


@pytest.fixture(scope="session")
def tiny_trace_f32(tmp_path_factory: pytest.TempPathFactory) -> TraceRun:
    """The same run in float32, where nano-vllm's add_rms_forward aliases residual and x."""
    return _trace(tmp_path_factory, "cpu-f32-tiny", "--dtype", "float32")


@pytest.fixture(scope="session")
def tiny_trace_tp2(tmp_path_factory: pytest.TempPathFactory) -> TraceRun:
    """The tiny preset on 2 tensor-parallel ranks (gloo, 2 processes), every tensor kept."""
    return _trace(tmp_path_factory, "cpu-bf16-tiny-tp2", "--tp", "2", "--full-tensors")


#: `annotate …` run by another interpreter (its venv's console script may not be where its python is)
OTHER_CLI = "import sys; from annotate.cli import main; sys.exit(main(sys.argv[1:]))"


def record_tiny_in(python: str, out: Path, *extra: str, env: dict[str, str] | None = None) -> None:
    """`annotate trace --preset tiny --full-tensors --quiet EXTRA --out OUT` run by interpreter `python` in a
    child process (environment: this one's, plus `env`); fails the caller with the end of its stderr."""
    res = subprocess.run([python, "-c", OTHER_CLI, "--root", str(ROOT), "trace", "--preset", "tiny", "--full-tensors",
                          "--quiet", *extra, "--out", str(out)], capture_output=True, text=True, timeout=900,
                         check=False, cwd=ROOT, env={**os.environ, **(env or {})})
    assert res.returncode == 0, res.stderr[-3000:]


def tiny_trace_py312(tmp_path_factory: pytest.TempPathFactory, python: str) -> Path:
    """The tiny trace recorded by the Python 3.12 interpreter `python` with sys.monitoring and the recorder's
    compiled (mypyc) modules, every tensor kept; made once per test run and read by two checks: test_monitor
    (against its settrace run) and test_native (against the Python recorder's run). The trace's folder."""
    from annotate.trace.record.native import ENV

    return once(tmp_path_factory, "trace-py312-tiny-monitoring",
                lambda folder: record_tiny_in(python, folder / "monitoring", "--line-events", "monitoring",
                                              env={ENV: "1"})) / "monitoring"
