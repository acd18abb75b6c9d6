"""Where vendored bytes come from: a registry wheel pinned by sha256, or a git repository + commit.

Both give the same thing: a dict of vendor-relative path -> bytes, checked before anything is
written (artifact hash first, then every member name). Nothing here touches vendor/.
"""
from __future__ import annotations

import hashlib
import re
import stat
import subprocess
import sys
import tempfile
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Callable, Iterable

from annotate.errors import UserError
from annotate.vendoring.lock import Source

WANTED = re.compile(r"^(nanovllm/.+\.py|LICENSE)$")
#: nano-vllm's files are a few KiB each: a member's recorded size is checked against these before it is read
MEMBER_CAP = 4 * 2**20
TOTAL_CAP = 64 * 2**20
_WHEEL_LICENSE = re.compile(r"^[^/]+\.dist-info/(licenses/)?LICENSE$")


@dataclass(frozen=True)
class GitCommit:
    """A resolved commit of a git source and the wanted files in its tree."""

    commit: str
    committed: str
    subject: str
    files: dict[str, bytes]


def wanted(source: Source) -> Callable[[str], bool]:
    """Which members a source gives: the lock's ``include`` list exactly, else nano-vllm's package and LICENSE."""
    if source.include:
        return frozenset(source.include).__contains__
    return lambda name: WANTED.match(name) is not None


def fetch(source: Source, cache: Path) -> dict[str, bytes]:
    """The files the lock's source provides, verified; raises UserError on any problem."""
    if source.kind == "wheel":
        return wheel_files(fetch_wheel(source, cache), source.sha256, wanted(source))
    return read_git(source.url, source.commit, want=wanted(source), subdir=source.subdir).files


# --- registry wheel -------------------------------------------------------------------------------


def fetch_wheel(source: Source, cache: Path) -> Path:
    """The wheel file, from the cache if a copy with the pinned hash is there, else via pip download."""
    pattern = f"{source.name.replace('-', '_')}-{source.version}-*.whl"
    for found in sorted(cache.glob(pattern)):
        if sha256_file(found) == source.sha256:
            return found
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
               "--dest", tmp, f"{source.name}=={source.version}"]
        run = subprocess.run(cmd, capture_output=True, text=True)
        wheels = list(Path(tmp).glob(pattern))
        if run.returncode != 0 or not wheels:
            last = (run.stderr.strip().splitlines() or ["no wheel"])[-1]
            raise UserError(f"could not download {source.name}=={source.version} with pip ({last}); "
                            "check the network or put the wheel in " + str(cache))
        got = sha256_file(wheels[0])
        if got != source.sha256:
            raise UserError(f"{wheels[0].name}: artifact hash mismatch (sha256 {got}, lock pins {source.sha256}); "
                            "refusing to read it")
        final = cache / wheels[0].name
        wheels[0].replace(final)
        return final


def wheel_files(wheel: Path, expected_sha256: str,
                want: Callable[[str], bool] = lambda name: WANTED.match(name) is not None) -> dict[str, bytes]:
    """Verify the wheel's hash *before* opening it, then take nanovllm/**/*.py and the LICENSE."""
    got = sha256_file(wheel)
    if got != expected_sha256:
        raise UserError(f"{wheel}: artifact hash mismatch (sha256 {got}, lock pins {expected_sha256}); "
                        "delete it and run `annotate vendor sync` again")
    try:
        return _read_wheel(wheel, want)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, EOFError, NotImplementedError, OSError) as exc:
        raise UserError(f"{wheel}: not a readable wheel (corrupt or not a zip archive: {exc}); "
                        "delete it and run `annotate vendor sync` again") from None


def _read_wheel(wheel: Path, want: Callable[[str], bool]) -> dict[str, bytes]:
    """The wanted members, each checked (name, link, recorded size against the caps) before it is decompressed."""
    files: dict[str, bytes] = {}
    total = 0
    with zipfile.ZipFile(wheel) as archive:
        for info in archive.infolist():
            check_member(info.filename, wheel, is_link=_zip_is_link(info))
            if info.is_dir():
                continue
            name = "LICENSE" if _WHEEL_LICENSE.match(info.filename) else info.filename
            if not want(name):
                continue
            total += info.file_size
            if info.file_size > MEMBER_CAP or total > TOTAL_CAP:
                raise UserError(f"{wheel}: member {info.filename!r} is {info.file_size} bytes uncompressed "
                                f"(cap {MEMBER_CAP} per file, {TOTAL_CAP} in all); refusing the archive")
            with archive.open(info) as member:
                data = member.read(info.file_size + 1)  # never more than the recorded size (+1 to see a lie)
            if len(data) != info.file_size:
                raise UserError(f"{wheel}: member {info.filename!r} does not hold its recorded {info.file_size} "
                                "bytes; refusing the archive")
            files[name] = data
    check_layout(files, wheel)
    return files


def check_layout(names: Iterable[str], archive: Path | str) -> None:
    """Refuse members where one's path is a folder of another's (`a.py` and `a.py/b.py`): no folder holds
    both, and staging would meet a file where it needs a folder."""
    taken = set(names)
    for name in sorted(taken):
        parts = name.split("/")
        for i in range(1, len(parts)):
            if (folder := "/".join(parts[:i])) in taken:
                raise UserError(f"{archive}: member {folder!r} is a file, and member {name!r} needs it to be a folder; "
                                "refusing the archive")


def _zip_is_link(info: zipfile.ZipInfo) -> bool:
    return stat.S_ISLNK(info.external_attr >> 16)


def check_member(name: str, archive: Path | str, is_link: bool = False) -> None:
    """Refuse a member that is a link, whose path would land outside the target folder, or whose name is too long."""
    pure = PurePosixPath(name.replace("\\", "/"))
    if len(name.encode("utf-8", "replace")) > 1024 or any(len(p.encode("utf-8", "replace")) > 255 for p in pure.parts):
        raise UserError(f"{archive}: member {name[:60]!r}… has a name too long for a file system; refusing the archive")
    if is_link:
        raise UserError(f"{archive}: member {name!r} is a symbolic link; refusing the archive")
    if name.startswith(("/", "\\")) or pure.is_absolute() or ".." in pure.parts or re.match(r"^[A-Za-z]:", name):
        raise UserError(f"{archive}: member {name!r} would be written outside the target; refusing the archive")


def sha256_file(path: Path) -> str:
    if not path.is_file():
        raise UserError(f"{path}: not a file (a folder or a link?); delete it and run `annotate vendor sync` again")
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


# --- git ------------------------------------------------------------------------------------------


def read_git(url: str, rev: str, allow_dirty: bool = True,
             want: Callable[[str], bool] = lambda name: WANTED.match(name) is not None, subdir: str = "") -> GitCommit:
    """Resolve ``rev`` in a git repository (local path or URL) and read the wanted files of its tree.

    ``subdir`` (``src/``) is the tree folder the vendored paths live under; it is dropped from the keys.
    Files are read from git's objects, never from a work tree, so a checkout's local edits can
    not leak in; ``allow_dirty=False`` refuses a local checkout with uncommitted changes.
    """
    local = Path(url).expanduser()
    if local.exists():
        if not allow_dirty:
            refuse_dirty(local)
        return _read_repo(local, rev, url, want, subdir)
    with tempfile.TemporaryDirectory() as tmp:
        _git(["clone", "--quiet", "--bare", url, tmp], url)
        return _read_repo(Path(tmp), rev, url, want, subdir)


def refuse_dirty(repo: Path) -> None:
    if _git(["-C", str(repo), "rev-parse", "--is-bare-repository"], str(repo)).strip() == "true":
        return  # a bare repository (a mirror) has no work tree that could be dirty
    status = _git(["-C", str(repo), "status", "--porcelain", "--untracked-files=no"], str(repo))
    if status.strip():
        first = status.strip().splitlines()[0]
        raise UserError(f"{repo}: the checkout has uncommitted changes ({first.strip()} …); "
                        "commit or stash them, then point at the commit")


def _read_repo(repo: Path, rev: str, label: str, want: Callable[[str], bool], subdir: str = "") -> GitCommit:
    try:
        commit = _git(["-C", str(repo), "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"], label).strip()
    except UserError:
        commit = ""
    if not commit:
        raise UserError(f"{label}: revision {rev!r} does not exist; pass a commit that `git log` shows there")
    meta = _git(["-C", str(repo), "show", "-s", "--format=%cI%n%s", commit], label).split("\n", 1)
    listing = _git(["-C", str(repo), "ls-tree", "-r", "-z", "--full-tree", commit], label)
    files: dict[str, bytes] = {}
    for entry in filter(None, listing.split("\0")):
        info, name = entry.split("\t", 1)
        mode, kind, obj = info.split()
        if not name.startswith(subdir) or not want(name[len(subdir):]):
            continue
        check_member(name, f"{label}@{commit[:12]}", is_link=mode == "120000")
        if kind == "blob":
            files[name[len(subdir):]] = _git_bytes(["-C", str(repo), "cat-file", "blob", obj], label)
    return GitCommit(commit=commit, committed=meta[0].strip(), subject=meta[1].strip() if len(meta) > 1 else "",
                     files=files)


def _git(args: list[str], label: str) -> str:
    return _git_bytes(args, label).decode("utf-8", errors="replace")


def _git_bytes(args: list[str], label: str) -> bytes:
    run = subprocess.run(["git", *args], capture_output=True)
    if run.returncode != 0:
        why = (run.stderr.decode(errors="replace").strip().splitlines() or ["git failed"])[-1]
        raise UserError(f"{label}: git {args[-1] if args else ''} failed ({why})")
    return run.stdout
