"""Plain helpers for the vendoring tests: crafted wheels and git commands in temp repositories."""
from __future__ import annotations

import io
import subprocess
import zipfile
from pathlib import Path
from typing import Callable

from annotate.vendoring.lock import sha256_bytes


def make_wheel(path: Path, members: dict[str, bytes], links: tuple[str, ...] = ()) -> str:
    """Write a zip with these members (``links`` become symlink entries); return its sha256."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
        for name in links:
            info = zipfile.ZipInfo(name)
            info.external_attr = (0o120777 << 16)
            archive.writestr(info, b"../../etc/passwd")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(buffer.getvalue())
    return sha256_bytes(buffer.getvalue())


def git(repo: Path, *args: str) -> str:
    run = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True,
                         env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
                              "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid",
                              "PATH": "/usr/bin:/bin:/usr/local/bin", "HOME": str(repo)})
    return run.stdout.strip()


def commit_then_edit(repo: Path, target: Path, edit: Callable[[Path], None], subject: str) -> str:
    """Make ``repo`` (already holding its files) a git repo with one commit as it is, then a second
    applying ``edit`` to ``target`` (an upstream that moved on); return the second commit."""
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "as vendored")
    edit(target)
    git(repo, "commit", "-q", "-am", subject)
    return git(repo, "rev-parse", "HEAD")
