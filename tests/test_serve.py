"""`annotate serve`: editing a note while the server runs updates the page (a real server, a real edit)."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

pytest_plugins = ["site_fixtures"]

PAGE = "source/nanovllm/layers/layernorm.py.html"
NOTES = "notes/nanovllm/layers/layernorm.py.yml"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fetch(url: str) -> str | None:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.read().decode("utf-8")
    except OSError:
        return None


def wait_for(predicate, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.5)
    return False


def test_editing_a_note_while_serving_updates_the_page(project: Path, tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/{PAGE}"
    temp = tmp_path / "temp"   # where MkDocs' serve puts its site (a mkdtemp), so this test can see it go
    temp.mkdir()
    server = subprocess.Popen([sys.executable, "-m", "annotate", "--root", str(project), "serve",
                               "--dev-addr", f"127.0.0.1:{port}"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                              env=dict(os.environ, TMPDIR=str(temp)))
    try:
        assert wait_for(lambda: fetch(url) is not None, 90), "the server did not come up"
        marker = "SERVE-TEST-MARKER-7d3f"
        assert marker not in fetch(url)
        notes = project / NOTES
        text = notes.read_text(encoding="utf-8")
        anchor = "Qwen3 的每个解码层"  # the start of the file's Chinese introduction
        assert anchor in text
        notes.write_text(text.replace(anchor, f"{marker} {anchor}", 1), encoding="utf-8")
        assert wait_for(lambda: marker in (fetch(url) or ""), 60), "the page did not pick up the edited note"
        assert [p.name for p in temp.iterdir() if p.name.startswith("mkdocs_")], "serve built no temp site"
    finally:
        server.send_signal(signal.SIGINT)   # Ctrl-C, as a reader stops it
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
    assert not [p for p in temp.iterdir() if p.name.startswith("mkdocs_")], "serve left its temp site behind"
