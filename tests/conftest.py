"""Session fixtures for the trace tests: ONE real compiled tiny trace per dtype, shared by all tests.

Each runs the real `annotate trace` command in-process (CLI → pipeline → real torch.compile on
CPU), so every trace test reads the same measured data instead of compiling again.
"""
from __future__ import annotations

import contextlib
import io
import json
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]


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
    _need_vendor()
    from annotate.trace.format.store import load_trace

    out = tmp_path_factory.mktemp("traces") / name
    rc, stdout, stderr = run_cli("trace", "--preset", "tiny", "--out", str(out), *extra)
    assert rc == 0, stderr
    payload = json.loads((out / "trace.json").read_text(encoding="utf-8"))
    return TraceRun(out, rc, stdout, stderr, payload, load_trace(out))


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
