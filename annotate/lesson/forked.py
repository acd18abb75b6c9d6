"""Where the lesson's claims are computed: a child forked from a server that has torch and transformers imported.

The computation runs outside the build process for the reasons `compute.py` gives: the build process never
imports torch, each project root gets a clean ``nanovllm`` import, and torch.compile is off from the start. A
fresh interpreter per computation paid ~7 s for that, 6 of them importing torch and transformers again, and a
process that builds many times (`annotate serve`, the test suite) paid it on every miss of the claims cache.

Here a process's first computation starts a server (``python -m annotate.lesson.forked``, one per process,
gone with it): it switches torch.compile off, imports :data:`PRELOAD` and nothing else, then forks one child
per request. The child imports everything of ours and everything vendored afresh, from disk, so an edit made
while a long-running process holds the server (the claim code, the vendored files) is computed with the edited
code, as the cache key that covers them says. A warm child takes ~1 s.

The protocol is one JSON line each way on the server's stdin and stdout: a request ``{"root", "out", "log"}``;
the answers ``{"pid"}`` (the child, so the client can kill it at its timeout or on Ctrl-C) and ``{"rc"}``. The
server ignores Ctrl-C (its client decides); the child's stdout and stderr go to the request's log. Where a
platform cannot fork, :func:`available` is False and the caller runs a fresh interpreter instead.
"""
from __future__ import annotations

import atexit
import json
import os
import select
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: what the server imports once, after switching torch.compile off: the third-party packages the vendored code
#: and the claim families import (a name missing from this install is skipped)
PRELOAD = ("torch", "torch.distributed", "transformers", "transformers.models.qwen3.configuration_qwen3",
           "transformers.models.auto.tokenization_auto", "safetensors")
#: how long a new server may take to import PRELOAD and say it is ready
START_TIMEOUT_S = 120.0



@dataclass
class _Server:
    """A running server and what it has said that was not read yet (its answers are read unbuffered, so that
    waiting for the next one never misses one already received)."""

    proc: subprocess.Popen[bytes]
    pending: bytes = field(default=b"")
    owner: int = field(default_factory=os.getpid)   # a process forked from the owner starts its own


_server: _Server | None = None


def available() -> bool:
    """Whether this platform can fork (POSIX)."""
    return hasattr(os, "fork")


def child_env() -> dict[str, str]:
    """This process's environment with the package's parent first on PYTHONPATH: what an interpreter started
    from here (the server, or a fresh one for the computation) needs to import `annotate` from wherever it is."""
    package_parent = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_parent, env.get("PYTHONPATH", "")) if p)
    return env


def compute_in_child(root: Path, out: Path, log: Path, timeout: float) -> int | None:
    """Compute the claims of `root` into `out` in a child forked by this process's server, its stdout and stderr
    in `log`; its exit code, or None when it ran past `timeout` seconds (it is then killed). When the wait is
    interrupted (Ctrl-C), the child and the server are killed and the interruption goes on."""
    server = _running_server()
    stdin = server.proc.stdin
    assert stdin is not None
    pid: int | None = None
    try:
        stdin.write((json.dumps({"root": str(root), "out": str(out), "log": str(log)}) + "\n").encode())
        stdin.flush()
        pid = int(_answer(server, time.monotonic() + START_TIMEOUT_S)["pid"])
        done = _answer(server, time.monotonic() + timeout, missing_ok=True)
        if done is None:   # past the timeout: kill it, and read the server's answer for it
            _kill(pid)
            _answer(server, time.monotonic() + START_TIMEOUT_S)
            return None
        return int(done["rc"])
    except BaseException:
        if pid is not None:
            _kill(pid)
        stop_server()
        raise


def stop_server() -> None:
    """End this process's server, if one runs (at exit; after a failed or interrupted request)."""
    global _server
    server, _server = _server, None
    if server is None or server.owner != os.getpid():   # (a forked copy leaves its parent's server alone)
        return
    proc = server.proc
    if proc.stdin is not None:
        try:
            proc.stdin.close()   # the server ends at the end of its input
        except OSError:
            pass
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()


def _running_server() -> _Server:
    """This process's server, started (and waited for) on first use, or again after it ended."""
    global _server
    if _server is not None and _server.owner == os.getpid() and _server.proc.poll() is None:
        return _server
    stop_server()
    proc = subprocess.Popen([sys.executable, "-m", "annotate.lesson.forked"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, bufsize=0, env=child_env())
    server = _server = _Server(proc)
    try:
        _answer(server, time.monotonic() + START_TIMEOUT_S)   # {"ready": true}
    except BaseException:
        stop_server()
        raise
    return server


def _answer(server: _Server, deadline: float, missing_ok: bool = False) -> Any:
    """The server's next JSON line; None when `missing_ok` and none came before `deadline`. A server that
    ended or said nothing in time is an error (RuntimeError: the caller stops it)."""
    stdout = server.proc.stdout
    assert stdout is not None
    while b"\n" not in server.pending:
        ready, _, _ = select.select([stdout], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            if missing_ok:
                return None
            raise RuntimeError("the claims server did not answer in time")
        chunk = os.read(stdout.fileno(), 65536)
        if not chunk:
            raise RuntimeError("the claims server ended")
        server.pending += chunk
    line, _, server.pending = server.pending.partition(b"\n")
    return json.loads(line)


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


atexit.register(stop_server)


# ------------------------------------------------------------------------------------------- the server side

def serve() -> None:
    """The server's loop (``python -m annotate.lesson.forked``): torch.compile off, :data:`PRELOAD` imported,
    then one forked child per request line until its input ends."""
    os.environ["TORCHDYNAMO_DISABLE"] = "1"   # before torch is imported, as in compute.py
    os.environ["TORCH_COMPILE_DISABLE"] = "1"
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # a terminal's Ctrl-C reaches the child; the client decides
    import importlib

    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    _say({"ready": True})
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _child(request)
        _say({"pid": pid})
        _, status = os.waitpid(pid, 0)
        _say({"rc": os.waitstatus_to_exitcode(status)})


def _say(answer: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(answer) + "\n")
    sys.stdout.flush()


def _child(request: dict[str, str]) -> None:
    """The forked child: Ctrl-C as in any program, stdin closed, stdout and stderr into the request's log,
    then `compute.main` run from the root, and the exit functions, as the fresh interpreter ran them. Never
    returns."""
    code = 1
    try:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        fd = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.chdir(request["root"])
        from annotate.lesson import compute

        code = compute.main([request["root"], request["out"]])
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        # what an interpreter's exit runs (the one-rank process group's temp folder is removed there), then
        # out without unwinding into the server's loop
        try:
            atexit._run_exitfuncs()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)


if __name__ == "__main__":
    serve()
