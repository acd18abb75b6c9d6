"""The output guard, the output lock, the sweep of a killed run's leftovers, Ctrl-C and a full disk."""
from __future__ import annotations

import contextlib
import errno
import io
import os
import signal
import subprocess
from pathlib import Path

import pytest

from annotate import guard, interrupts
from annotate.cli import main
from annotate.errors import UserError
from site_fixtures import copy_project

pytest_plugins = ["site_fixtures"]


def _project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    for name in ("docs", "notes", "vendor", "traces"):
        (root / name).mkdir(parents=True)
    return root


@pytest.mark.parametrize("target, message", [
    (".", "is the project root"), ("..", "is the project root"), ("notes", "input notes/"),
    ("docs/site", "input docs/"), ("vendor", "input vendor/"), ("traces", "input traces/"),
])
def test_refuses_the_root_and_the_inputs(tmp_path: Path, target: str, message: str) -> None:
    root = _project(tmp_path)
    with pytest.raises(UserError, match=message):
        guard.refuse_unsafe_output(root, root / target, "--site-dir")


def test_refuses_a_foreign_folder_and_accepts_its_own(tmp_path: Path) -> None:
    root = _project(tmp_path)
    out = tmp_path / "out"
    guard.refuse_unsafe_output(root, out, "--site-dir")  # new: fine
    out.mkdir()
    guard.refuse_unsafe_output(root, out, "--site-dir")  # empty: fine
    (out / "essay.md").write_text("mine")
    with pytest.raises(UserError, match="not empty and not a previous annotate output"):
        guard.refuse_unsafe_output(root, out, "--site-dir")
    guard.mark(out)
    guard.refuse_unsafe_output(root, out, "--site-dir")  # carries the marker: a previous output


def test_refuses_tracked_files_even_with_a_marker(tmp_path: Path) -> None:
    root = _project(tmp_path)
    out = root / "out"
    out.mkdir()
    guard.mark(out)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "add", "out"], check=True)
    with pytest.raises(UserError, match="holds git-tracked files"):
        guard.refuse_unsafe_output(root, out, "--site-dir")


def test_a_trace_may_live_in_traces_and_replace_a_tracked_trace(tmp_path: Path) -> None:
    root = _project(tmp_path)
    out = root / "traces" / "cpu"
    out.mkdir()
    (out / "trace.json").write_text("{}")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "add", "traces"], check=True)
    guard.refuse_unsafe_output(root, out, "--out", ours=lambda f: (f / "trace.json").is_file(), home="traces",
                               tracked_ok=True)


def test_the_lock_refuses_a_second_run_and_leaves_nothing(tmp_path: Path) -> None:
    root = _project(tmp_path)
    target = tmp_path / "site"
    with guard.output_lock(root, target, "--site-dir"):
        with pytest.raises(UserError, match="another annotate run is writing it"):
            with guard.output_lock(root, target, "--site-dir"):
                pass
    assert not (root / guard.LOCKS_DIR).exists()
    with guard.output_lock(root, target, "--site-dir"):  # free again
        pass


def test_sweep_removes_staging_and_restores_an_interrupted_swap(tmp_path: Path) -> None:
    target = tmp_path / "cpu"
    (tmp_path / ".cpu.tmp-abc").mkdir()
    (tmp_path / ".cpu.new-abc").mkdir()
    old = tmp_path / ".cpu.old-abc"
    old.mkdir()
    (old / "trace.json").write_text("previous good copy")
    (tmp_path / ".other.tmp-abc").mkdir()  # another output's staging: not ours to touch
    done = guard.sweep(target)
    assert (target / "trace.json").read_text() == "previous good copy"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".other.tmp-abc", "cpu"]
    assert "restored cpu from .cpu.old-abc" in done


def test_a_build_puts_back_a_trace_an_interrupted_swap_moved_aside(tmp_path: Path) -> None:
    root = _project(tmp_path)
    old = root / "traces" / ".cpu.old-xyz"
    old.mkdir()
    (old / "trace.json").write_text("{}")
    assert guard.recover_outputs(root, root / "traces") == ["restored cpu"]
    assert (root / "traces" / "cpu" / "trace.json").is_file() and not old.exists()


def _hold(root: Path, target: Path):
    """The output lock of ``target`` as another run holds it (a second open file: flock conflicts)."""
    import fcntl

    path = guard.lock_path(root, target)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = open(path, "a+b")
    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return handle


def test_a_build_inside_another_runs_swap_window_refuses_instead_of_dropping_the_trace(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`traces/cpu` moved aside, its new copy not yet renamed in, the trace run holding the lock: the build
    read no trace and exited 0. Now it waits for the swap, then refuses with one line."""
    root = _project(tmp_path)
    old = root / "traces" / ".cpu.old-xyz"
    old.mkdir()
    (old / "trace.json").write_text("{}")
    monkeypatch.setattr(guard, "SWAP_WAIT_S", 0.2)
    handle = _hold(root, root / "traces" / "cpu")
    try:
        with pytest.raises(UserError) as info:
            guard.recover_outputs(root, root / "traces")
    finally:
        handle.close()
    msg = str(info.value)
    assert "traces/cpu: another annotate run is replacing it" in msg and ".cpu.old-xyz" in msg and "\n" not in msg
    assert old.is_dir() and not (root / "traces" / "cpu").exists()          # the other run's state untouched


def test_a_build_waits_for_a_swap_that_completes(tmp_path: Path) -> None:
    import threading

    root = _project(tmp_path)
    old = root / "traces" / ".cpu.old-xyz"
    old.mkdir()
    handle = _hold(root, root / "traces" / "cpu")
    done = threading.Timer(0.2, lambda: (root / "traces" / "cpu").mkdir())   # the other run's second rename
    done.start()
    try:
        assert guard.recover_outputs(root, root / "traces") == []
    finally:
        done.join()
        handle.close()
    assert (root / "traces" / "cpu").is_dir()


def test_a_swallowed_ctrl_c_is_raised_again() -> None:
    with interrupts.watched() as interrupted:
        with contextlib.suppress(KeyboardInterrupt):  # what a library that swallows it does
            os.kill(os.getpid(), signal.SIGINT)
        with pytest.raises(KeyboardInterrupt):
            interrupted()


def test_a_full_disk_is_one_line_and_keeps_the_old_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib
    import shutil

    sync = importlib.import_module("annotate.vendoring.sync")  # the module (the package exports a function of that name)

    project = copy_project(tmp_path / "project")
    shutil.rmtree(project / "vendor/nano-vllm")
    for cached in (Path(__file__).resolve().parents[1] / ".cache/wheels").glob("*.whl"):
        (project / ".cache/wheels").mkdir(parents=True, exist_ok=True)
        shutil.copy2(cached, project / ".cache/wheels" / cached.name)
    lock_before = (project / "vendor/nano-vllm.lock.json").read_bytes()

    def full(path: Path, data: bytes) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(sync, "write_file", full)
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        rc = main(["--root", str(project), "vendor", "sync"])
    lines = [line for line in err.getvalue().splitlines() if line.startswith("annotate: error:")]
    assert rc == 1 and len(lines) == 1 and "No space left on device" in lines[0], err.getvalue()
    assert "Traceback" not in err.getvalue()
    assert not (project / "vendor/nano-vllm").exists()
    assert (project / "vendor/nano-vllm.lock.json").read_bytes() == lock_before
    assert not [p for p in (project / "vendor").iterdir() if p.name.startswith(".nano-vllm.")]


def test_killed_runs_temp_folders_are_swept(tmp_path: Path) -> None:
    from annotate.trace.model.runtime import sweep_temp

    child = subprocess.Popen(["true"])
    child.wait()  # its pid is gone once it is reaped
    (tmp_path / f"annotate-ckpt-{child.pid}-abc").mkdir()
    (tmp_path / f"annotate-pg-{child.pid}-abc").mkdir()
    (tmp_path / f"annotate-ckpt-{os.getpid()}-abc").mkdir()  # this run: alive, kept
    (tmp_path / "annotate-mini-abc").mkdir()  # not a run's folder: kept
    sweep_temp(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"annotate-ckpt-{os.getpid()}-abc", "annotate-mini-abc"]


@pytest.mark.slow
def test_ctrl_c_swallowed_during_compile_still_exits_130(tiny_trace, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from annotate.trace.model import runtime
    from conftest import run_cli

    real = runtime.run_prefill
    calls = []

    def swallowed(rt):
        if not calls:
            with contextlib.suppress(KeyboardInterrupt):
                os.kill(os.getpid(), signal.SIGINT)
        calls.append(1)
        return real(rt)

    monkeypatch.setattr(runtime, "run_prefill", swallowed)
    out = tmp_path / "out"
    rc, _, err = run_cli("trace", "--preset", "tiny", "--out", str(out), "--quiet")
    assert rc == 130 and "interrupted; nothing half-written was kept" in err
    assert not out.exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".out.")]


def test_an_output_that_cannot_really_be_made_is_refused_and_the_probe_leaves_nothing(tmp_path: Path) -> None:
    """`os.access` says yes to root under /proc; the probe folder does not (issue 23, 25: `trace --out /proc/x`
    ran the whole trace, then failed with a traceback)."""
    from annotate.guard import refuse_uncreatable

    (tmp_path / "file").write_text("x", encoding="utf-8")
    for target, where in ((Path("/proc/annotate-x/deep"), "/proc"), (tmp_path / "file" / "out", str(tmp_path / "file"))):
        with pytest.raises(UserError) as info:
            refuse_uncreatable(target, "--out")
        assert str(info.value).startswith(f"--out {target}: cannot write in {where} (") and "choose a writable --out" in str(info.value)
    refuse_uncreatable(tmp_path / "new" / "deeper" / "out", "--out")     # creatable: nothing made, nothing left
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]
