"""annotate.trace.parallel: the --tp launcher — rendezvous, a rank that fails, no stray processes."""
from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from annotate.errors import UserError
from annotate.trace.model.options import TraceOptions
from annotate.trace import parallel
from annotate.trace.parallel import check_file_store, check_port, failure, free_port, rendezvous

ROOT = Path(__file__).resolve().parents[1]


def test_default_rendezvous_is_a_free_local_port() -> None:
    rv = rendezvous(TraceOptions(preset="tiny", tp=2))
    assert rv.backend == "gloo" and rv.world == 2 and rv.init_method.startswith("tcp://127.0.0.1:")
    assert rendezvous(TraceOptions(preset="tiny", tp=2, device="cuda")).backend == "nccl"


def test_a_port_in_use_is_one_line() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(UserError, match=f"port {port} on 127.0.0.1 is in use"):
            check_port(f"tcp://127.0.0.1:{port}")
    check_port(f"tcp://127.0.0.1:{free_port()}")   # free again: accepted
    check_port("file:///tmp/some-store")           # not a port: nothing to check


@pytest.mark.parametrize("url, folder", [("file:///proc/annotate-rdv/x", "/proc/annotate-rdv"),
                                         ("file:///nonexistent-dir/a/b", "/nonexistent-dir/a")])
def test_a_file_store_no_rank_can_make_is_one_line_before_any_rank_starts(url: str, folder: str) -> None:
    """Both ranks waited out the collectives' 600 s for a store that could never open."""
    with pytest.raises(UserError) as err:
        check_file_store(url)
    msg = str(err.value)
    assert msg.startswith(f"--init-method {url}: the ranks cannot make their store in {folder} (") and "\n" not in msg
    assert not Path(folder).exists()


def test_a_file_store_in_a_writable_folder_passes_and_leaves_nothing(tmp_path: Path) -> None:
    check_file_store(f"file://{tmp_path}/store")
    check_file_store("tcp://127.0.0.1:1")            # not a file store: nothing to check
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(UserError, match="got a folder or no path"):
        check_file_store(f"file://{tmp_path}")


def _silent_listener() -> tuple[socket.socket, list[socket.socket]]:
    """A port on 127.0.0.1 that accepts connections and never says a word (loopback only)."""
    import threading

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    accepted: list[socket.socket] = []

    def serve() -> None:
        with contextlib.suppress(OSError):
            while True:
                accepted.append(server.accept()[0])
    threading.Thread(target=serve, daemon=True).start()
    return server, accepted


def _trace_tp2(tmp_path: Path) -> tuple[int, str]:
    import contextlib as cl
    import io

    from annotate.cli import main

    err = io.StringIO()
    with cl.redirect_stderr(err), cl.redirect_stdout(io.StringIO()):
        rc = main(["--root", str(ROOT), "trace", "--preset", "tiny", "--tp", "2", "--out", str(tmp_path / "out")])
    return rc, err.getvalue()


def test_a_rendezvous_host_that_never_answers_is_one_line_after_the_short_timeout(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A torchrun rank whose master accepts and never answers: the store's own timeout never fires, so the
    rank waited with no word; now the rendezvous has its own short limit, apart from the collectives'."""
    server, accepted = _silent_listener()
    monkeypatch.setattr(parallel, "RENDEZVOUS_TIMEOUT_S", 2)
    for key, value in {"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
                       "MASTER_PORT": str(server.getsockname()[1])}.items():
        monkeypatch.setenv(key, value)
    try:
        rc, err = _trace_tp2(tmp_path)
    finally:
        for conn in accepted:
            conn.close()
        server.close()
    lines = err.strip().splitlines()
    assert rc == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("annotate: error: --tp 2: the ranks did not meet at the rendezvous env:// within 2 s "
                               "(its store did not answer); check MASTER_ADDR:MASTER_PORT"), lines[0]
    assert accepted and parallel.RENDEZVOUS_TIMEOUT_S < parallel.COLLECTIVE_TIMEOUT_S
    assert not (tmp_path / "out").exists()


def test_rank_and_world_size_left_without_master_addr_is_one_line(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.delenv("MASTER_ADDR", raising=False)
    monkeypatch.delenv("MASTER_PORT", raising=False)
    rc, err = _trace_tp2(tmp_path)
    assert rc == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert "RANK=0 WORLD_SIZE=2 are set but MASTER_ADDR and MASTER_PORT are not" in err
    assert not (tmp_path / "out").exists()


def test_the_failure_names_the_rank_that_went_first(tmp_path: Path) -> None:
    assert failure([1, -9], tmp_path) == "rank 1 was killed (signal 9)"
    (tmp_path / "rank1.err").write_text("ValueError: boom\n", encoding="utf-8")
    time.sleep(0.02)
    (tmp_path / "rank0.err").write_text("RuntimeError: Connection closed by peer\n", encoding="utf-8")
    assert failure([1, 1], tmp_path) == "rank 1 failed: ValueError: boom"
    assert failure([None, 2], tmp_path / "none") == "rank 1 exited with status 2"


def _children(pid: int) -> set[int]:
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True).stdout
    return {int(x) for x in out.split()}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.is_file() and stat.read_text().split()[2] == "Z")


@pytest.mark.slow
def test_a_killed_rank_fails_the_run_in_one_line_and_leaves_nothing(tmp_path: Path) -> None:
    """SIGKILL rank 1 while the ranks run: exit != 0, one line naming rank 1 and the signal, no
    traceback, every rank gone, and the trace that was there before is untouched."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "trace.json").write_text('{"format": "annotate-trace"}', encoding="utf-8")
    before = (out / "trace.json").read_bytes()
    proc = subprocess.Popen([sys.executable, "-m", "annotate", "--root", str(ROOT), "trace", "--preset", "tiny",
                             "--tp", "2", "--out", str(out), "--force", "--quiet"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    work = None
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and work is None:
        found = [p.parent for p in Path(tempfile.gettempdir()).glob(f"annotate-tp-{proc.pid}-*/rank1.pid")]
        work = found[0] if found and (found[0] / "rank0.pid").is_file() else None
        time.sleep(0.2)
    assert work is not None, "the ranks never started"
    ranks = [int((work / f"rank{r}.pid").read_text()) for r in (0, 1)]
    time.sleep(1.0)
    os.kill(ranks[1], signal.SIGKILL)
    _, err = proc.communicate(timeout=120)
    lines = [x for x in err.splitlines() if x.strip()]
    assert proc.returncode != 0
    assert any("rank 1 was killed (signal 9)" in x for x in lines), err
    assert "Traceback" not in err
    assert not _children(proc.pid)
    assert not any(_alive(p) for p in ranks)
    assert not work.exists()
    left = [p for p in Path(tempfile.gettempdir()).glob("annotate-*") if any(f"-{r}-" in p.name for r in ranks)]
    assert not left, left
    assert (out / "trace.json").read_bytes() == before


@pytest.mark.parametrize("raw", ["nan", "inf", "-inf", "0", "-1", "3601", "1e308", "soon", " "])
def test_a_rendezvous_limit_that_is_not_seconds_is_one_line(raw: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(parallel.RENDEZVOUS_ENV, raw)
    with pytest.raises(UserError, match="expected the seconds the --tp ranks may take to meet"):
        parallel.rendezvous_limit()


def test_the_rendezvous_limit_defaults_and_can_be_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(parallel.RENDEZVOUS_ENV, raising=False)
    assert parallel.rendezvous_limit() == parallel.RENDEZVOUS_TIMEOUT_S
    monkeypatch.setenv(parallel.RENDEZVOUS_ENV, "120")
    assert parallel.rendezvous_limit() == 120.0
    assert parallel.rendezvous_limit() < parallel.COLLECTIVE_TIMEOUT_S
