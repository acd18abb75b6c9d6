"""annotate.lesson.forked: the claims computed in children of a server that has torch and transformers imported.

Real processes throughout: the server is `python -m annotate.lesson.forked`, its children run the real
vendored code of scratch project roots (a copy of the vendored nano-vllm, edited where a test says).
"""
from __future__ import annotations

import json
import math
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from annotate.errors import UserError
from annotate.lesson import cache, forked
from test_claims import edit, needs_vendor, scratch

pytestmark = [needs_vendor, pytest.mark.skipif(not forked.available(), reason="this platform cannot fork")]

REPO = Path(__file__).resolve().parents[1]


def computed(root: Path, tmp: Path, fresh: bool = False, timeout: float = cache.TIMEOUT_S) -> tuple[int | None, dict]:
    """(exit code, claims JSON) of one computation of `root`, in a forked child or (`fresh`) a fresh interpreter."""
    tmp.mkdir(parents=True, exist_ok=True)
    out, log = tmp / "claims.json", tmp / "claims.log"
    rc = cache._fresh_interpreter(root, out, log) if fresh else forked.compute_in_child(root, out, log, timeout)
    return rc, json.loads(out.read_text(encoding="utf-8")) if out.is_file() else {}


def children(pid: int) -> set[int]:
    """The processes whose parent is `pid` (from /proc)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.add(int(entry.name))
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def left_behind(before: set[str]) -> list[str]:
    """The temp folders of annotate processes (`runtime.TEMP_PREFIX`) made since `before` whose process is gone."""
    from annotate.trace.model.options import TEMP_PREFIX

    found = (re.match(rf"^{TEMP_PREFIX}(?:ckpt|pg|tp|exp)-(\d+)-", p.name) for p in Path(tempfile.gettempdir()).iterdir())
    return [m.group(0) for m in found if m and m.string not in before and not alive(int(m.group(1)))]


def test_a_forked_child_computes_what_a_fresh_interpreter_does_and_sees_later_edits(tmp_path: Path) -> None:
    root = scratch(tmp_path)
    before = {p.name for p in Path(tempfile.gettempdir()).iterdir()}
    rc, forked_claims = computed(root, tmp_path / "forked")
    assert left_behind(before) == []   # the child ran its exit functions: its process group's folder is gone
    fresh_rc, fresh_claims = computed(root, tmp_path / "fresh", fresh=True)
    assert rc == fresh_rc == 0 and forked_claims == fresh_claims and len(forked_claims["claims"]) > 100
    assert forked_claims["failed"] == {}
    # an edit made while the server lives: the next child imports the vendored code from disk again
    server = forked._running_server().proc.pid
    edit(root, "nanovllm/layers/layernorm.py", "torch.rsqrt(var + self.eps)", "torch.rsqrt(var + 2 * self.eps)", count=2)
    rc, edited = computed(root, tmp_path / "edited")
    assert rc == 0 and forked._running_server().proc.pid == server
    assert edited["claims"]["rmsnorm.eps1.output"]["value"] == pytest.approx([3 / math.sqrt(14.5), 4 / math.sqrt(14.5)],
                                                                             abs=1e-6)
    assert forked_claims["claims"]["rmsnorm.eps1.output"]["value"] != edited["claims"]["rmsnorm.eps1.output"]["value"]


def test_a_child_past_its_timeout_is_killed_and_the_server_serves_on(tmp_path: Path) -> None:
    slow = scratch(tmp_path / "slow")
    init = slow / "vendor" / "nano-vllm" / "nanovllm" / "__init__.py"
    init.write_text("import time\ntime.sleep(120)\n" + init.read_text(encoding="utf-8"), encoding="utf-8")
    server = forked._running_server().proc.pid
    rc, _ = computed(slow, tmp_path / "slow-run", timeout=3)
    assert rc is None
    assert not children(server)                     # the sleeping child is gone, not left to finish
    rc, claims = computed(scratch(tmp_path / "fine"), tmp_path / "fine-run")
    assert rc == 0 and claims["claims"] and forked._running_server().proc.pid == server


def test_a_child_that_dies_is_one_clear_line_and_the_next_one_runs(tmp_path: Path) -> None:
    dying = scratch(tmp_path / "dying")
    init = dying / "vendor" / "nano-vllm" / "nanovllm" / "__init__.py"
    init.write_text("import os\nos._exit(3)\n", encoding="utf-8")
    with pytest.raises(UserError) as caught:
        cache.run_child(dying)
    message = str(caught.value)
    assert "\n" not in message and "computing the lesson's claims failed" in message and "python -m annotate.lesson.compute" in message
    rc, claims = computed(scratch(tmp_path / "fine"), tmp_path / "fine-run")
    assert rc == 0 and claims["claims"]


CLIENT = """
import sys, time
from pathlib import Path
from annotate.lesson import forked
server = forked._running_server().proc.pid
print(server, flush=True)
forked.compute_in_child(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), 300)
"""


def test_ctrl_c_while_a_child_computes_ends_the_child_and_the_server(tmp_path: Path) -> None:
    """The client interrupted (SIGINT to it alone, as a handler that stops a build would be): it kills the child
    and its server, and nothing of either is left running."""
    slow = scratch(tmp_path / "slow")
    init = slow / "vendor" / "nano-vllm" / "nanovllm" / "__init__.py"
    init.write_text("import time\ntime.sleep(120)\n" + init.read_text(encoding="utf-8"), encoding="utf-8")
    client = subprocess.Popen([sys.executable, "-c", CLIENT, str(slow), str(tmp_path / "o.json"), str(tmp_path / "o.log")],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
                              env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        assert client.stdout is not None
        server = int(client.stdout.readline())
        deadline = time.monotonic() + 60
        while not children(server) and time.monotonic() < deadline:   # the child has started
            time.sleep(0.2)
        child = children(server)
        assert len(child) == 1
        client.send_signal(signal.SIGINT)
        _, err = client.communicate(timeout=30)
    finally:
        client.kill()
    assert client.returncode != 0 and "KeyboardInterrupt" in err
    deadline = time.monotonic() + 10
    while (alive(server) or any(alive(p) for p in child)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not alive(server) and not any(alive(p) for p in child)


def test_a_forked_copy_of_the_client_leaves_its_parents_server_alone() -> None:
    """A copy of a client made by fork shares the pipes to its parent's server: it starts a server of its own,
    and ending its server never ends the parent's."""
    first = forked._running_server()
    first.owner = os.getpid() + 1   # what the copy sees: a server some other process owns
    second = None
    try:
        second = forked._running_server()
        assert second.proc.pid != first.proc.pid
        forked._server = first
        forked.stop_server()        # the copy's exit: the parent's server is forgotten, not stopped
        assert first.proc.poll() is None and alive(first.proc.pid)
    finally:
        for server in (first, second):
            if server is not None:
                server.owner = os.getpid()
                forked._server = server
                forked.stop_server()


def test_a_server_that_fails_gives_way_to_a_fresh_interpreter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A server gone mid-request (here: a process that already ended, so writing the request breaks the pipe) is
    stopped, and the claims come from a fresh interpreter instead: the same JSON, no traceback."""
    dead = subprocess.Popen(["true"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
    dead.wait()
    monkeypatch.setattr(forked, "_running_server", lambda: forked._Server(dead))
    root = scratch(tmp_path)
    got = cache.run_child(root)
    monkeypatch.undo()
    for pipe in (dead.stdin, dead.stdout):
        if pipe is not None:
            pipe.close()
    assert got == {**computed(root, tmp_path / "fresh", fresh=True)[1], "format": cache.CLAIMS_FORMAT}
