"""Output guard: the one check every command runs before it replaces a folder.

A command that replaces a folder (``build --site-dir``, ``trace --out``, ``vendor sync``,
``vendor update``) deletes what was there. So before any work it asks :func:`refuse_unsafe_output`:

- never the project root or a folder holding it (``--site-dir .`` once deleted the project),
- never one of the project's inputs (mkdocs.yml's docs_dir, ``notes/``, ``vendor/``, ``traces/``,
  ``map/``: :attr:`annotate.project.Project.inputs`) or a folder inside or around one,
- never a folder holding git-tracked files,
- never a non-empty folder that does not carry this tool's mark of a previous output
  (:data:`OUTPUT_MARKER`, or the output's own recognisable file such as a trace's ``trace.json``).

It also owns the lock that keeps two runs off one output (:func:`output_lock`) and the sweep that
cleans what a killed run left beside an output (:func:`sweep`): staging folders are removed and a
previous copy moved aside by an interrupted swap is put back.
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Callable, Iterator

from annotate.atomic import NEW, OLD, STAGING, staging_prefix
from annotate.errors import UserError
from annotate.project import Project, project_inputs

#: the file every folder written by `annotate build` carries: "this folder is a previous output"
OUTPUT_MARKER = ".annotate-output"
LOCKS_DIR = f"{Project.CACHE_DIR}/locks"


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def refuse_unsafe_output(root: Path, target: Path, flag: str, inputs: tuple[str, ...] | None = None,
                         ours: Callable[[Path], bool] | None = None, home: str | None = None,
                         tracked_ok: bool = False) -> None:
    """Raise one UserError line when replacing ``target`` could lose anything; else return.

    ``flag`` names the option in messages (``--site-dir``); ``inputs`` are the root-relative folders
    never to touch (default: the project's, read from its mkdocs.yml); ``ours(folder)`` says whether a
    non-empty folder is a previous output of this command (default: it carries :data:`OUTPUT_MARKER`).
    ``home`` is the input folder this kind of output lives in (``traces`` for a trace): an output
    may sit inside it but never be it or hold it. ``tracked_ok`` lets a previous output that git
    tracks be replaced (a committed trace: git keeps the old copy).
    """
    root, target = root.resolve(), target.resolve()
    if _inside(root, target):
        raise UserError(f"{flag} {target}: is the project root or a folder holding it; "
                        "choose a new folder such as site/ (nothing was changed)")
    for name in project_inputs(root) if inputs is None else inputs:
        folder = root / name
        inside_home = home is not None and name == home and target != folder and _inside(target, folder)
        if not inside_home and (_inside(target, folder) or _inside(folder, target)):
            raise UserError(f"{flag} {target}: is or holds the project's input {name}/; "
                            "choose a folder outside the inputs (nothing was changed)")
    if target.exists() and not target.is_dir():
        raise UserError(f"{flag} {target}: is a file, not a folder; choose a folder (nothing was changed)")
    if not target.is_dir():
        return
    is_ours = ours or (lambda folder: (folder / OUTPUT_MARKER).is_file())
    tracked = tracked_files(target)
    if tracked and not (tracked_ok and is_ours(target)):
        raise UserError(f"{flag} {target}: holds git-tracked files ({tracked[0]} …); "
                        "choose a folder git does not track (nothing was changed)")
    if any(target.iterdir()) and not is_ours(target):
        raise UserError(f"{flag} {target}: not empty and not a previous annotate output (no {OUTPUT_MARKER}); "
                        "choose an empty or new folder (nothing was changed)")


def refuse_uncreatable(target: Path, flag: str) -> None:
    """Refuse a ``target`` that cannot really be made, before any work: the nearest existing folder above
    it must take a new folder (the staging copy is made beside ``target``). ``os.access`` says yes to root
    everywhere, ``/proc`` included, so a probe folder is made there and removed at once."""
    existing = target.parent
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    reason = None if existing.is_dir() else "not a folder"
    if reason is None:
        try:
            os.rmdir(tempfile.mkdtemp(prefix=".annotate-probe-", dir=existing))
        except OSError as exc:
            reason = exc.strerror or str(exc)
    if reason is not None:
        raise UserError(f"{flag} {target}: cannot write in {existing} ({reason}); choose a writable {flag} "
                        "(nothing was changed)")


def tracked_files(folder: Path) -> list[str]:
    """Git-tracked files under ``folder`` (empty when it is in no git work tree)."""
    try:
        run = subprocess.run(["git", "-C", str(folder), "ls-files", "-z", "--", "."],
                             capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return []
    if run.returncode != 0:
        return []
    return [name for name in run.stdout.decode("utf-8", "replace").split("\0") if name]


def mark(folder: Path) -> None:
    """Write :data:`OUTPUT_MARKER` into a staged output folder (before it is swapped in)."""
    (folder / OUTPUT_MARKER).write_text("written by annotate; the next run may replace this folder\n", encoding="utf-8")


@contextlib.contextmanager
def output_lock(root: Path, target: Path, flag: str, paired: Path | None = None) -> Iterator[None]:
    """Hold an exclusive lock on ``target`` for this run; a second run on it refuses with one line.

    The lock file lives under ``.cache/locks`` (git-ignored), keyed by the target's absolute path,
    so taking it creates nothing next to the output; the kernel releases it when the process dies.
    ``paired`` is a file that changes together with ``target`` (a vendor folder's lock): what a killed
    run left of the pair is put back to the last state in which both agreed (:func:`roll_back_pair`).
    """
    path = lock_path(root, target)
    folder = path.parent
    made = [f for f in (folder, *folder.parents) if _inside(f, root.resolve()) and f != root.resolve() and not f.exists()]
    folder.mkdir(parents=True, exist_ok=True)
    handle = open(path, "a+b")   # held for the whole run: the kernel drops the lock when the process dies
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        handle.close()   # not ours: the file stays for the run that holds it
        if exc.errno not in (errno.EAGAIN, errno.EACCES):
            raise
        raise UserError(f"{flag} {target}: another annotate run is writing it; wait for it to finish") from None
    try:
        if paired is not None:
            roll_back_pair(target, paired)
            sweep(paired)
        sweep(target)
        yield
    finally:
        path.unlink(missing_ok=True)  # while still held: a run that opened it before now refuses
        handle.close()
        for created in made or [folder]:   # .cache/locks, and .cache itself when this run made it
            with contextlib.suppress(OSError):
                created.rmdir()


def lock_path(root: Path, target: Path) -> Path:
    """The lock file of output ``target``: ``.cache/locks/<hash of its absolute path>.lock``."""
    key = hashlib.sha256(str(target.resolve()).encode()).hexdigest()[:16]
    return root.resolve() / LOCKS_DIR / f"{key}.lock"


def sweep(target: Path) -> list[str]:
    """Clean what a killed run left beside ``target``; return what was done (for tests and messages).

    Staged files and folders (``.<name>.new-*`` and older versions' names, :data:`annotate.atomic.STAGING`)
    are removed. A previous copy moved aside by a swap (``.<name>.old-*``) is put back when ``target`` is
    missing (the swap died between its two renames), else removed. Call it only while holding
    :func:`output_lock`.
    """
    parent, done = target.parent, list[str]()
    if not parent.is_dir():
        return done
    olds = []
    for entry in sorted(parent.iterdir()):
        m = STAGING.match(entry.name)
        if not m or m.group("name") != target.name:
            continue
        if m.group("kind") == OLD:
            olds.append(entry)
        else:
            _remove(entry)
            done.append(f"removed {entry.name}")
    if olds and not target.exists():
        newest = max(olds, key=lambda p: p.stat().st_mtime)
        os.replace(newest, target)
        olds.remove(newest)
        done.append(f"restored {target.name} from {newest.name}")
    for old in olds:
        _remove(old)
        done.append(f"removed {old.name}")
    return done


def roll_back_pair(target: Path, paired: Path) -> list[str]:
    """Undo a swap of folder ``target`` whose ``paired`` file was never renamed into place.

    `vendor update` swaps the new vendor folder in, then renames its staged lock over the old one. A
    run killed between those two renames leaves the new folder, the old one moved aside (``.<name>.old-*``)
    and the staged lock (``.<lock>.new-*``) beside the old lock: the new folder goes aside to be swept and
    the old one comes back, so folder and lock agree again. Call it only while holding :func:`output_lock`.
    """
    parent = target.parent
    if not parent.is_dir() or not target.exists():
        return []
    olds = [e for e in parent.iterdir() if (m := STAGING.match(e.name)) and m.group("kind") == OLD
            and m.group("name") == target.name]
    staged = [e for e in paired.parent.iterdir() if (m := STAGING.match(e.name)) and m.group("kind") == NEW
              and m.group("name") == paired.name] if paired.parent.is_dir() else []
    if not olds or not staged:
        return []
    aside = Path(tempfile.mkdtemp(prefix=staging_prefix(target), dir=parent))   # a NEW name: swept next
    aside.rmdir()
    os.replace(target, aside)
    newest = max(olds, key=lambda p: p.stat().st_mtime)
    os.replace(newest, target)
    return [f"put back {target.name} from {newest.name}: {paired.name} was never updated"]


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


#: how long a reader waits for another run's swap to finish (its two renames are an instant apart)
SWAP_WAIT_S = 5.0


def recover_outputs(root: Path, folder: Path) -> list[str]:
    """Put back every output under ``folder`` that an interrupted swap left aside (``.<name>.old-*`` with
    no ``<name>``), each under its output lock.

    When another run holds that lock it is between its swap's two renames: wait for the new copy
    (:data:`SWAP_WAIT_S`), and refuse with one line if it does not come, rather than read the folder
    without it (a build then published a site with the trace silently missing).
    """
    done: list[str] = []
    if not folder.is_dir():
        return done
    for entry in sorted(folder.iterdir()):
        m = STAGING.match(entry.name)
        if not m or m.group("kind") != OLD or (folder / m.group("name")).exists():
            continue
        target = folder / m.group("name")
        try:
            with output_lock(root, target, "output"):
                done.append(f"restored {target.name}")
        except UserError:
            _await_swap(target, entry)
    return done


def _await_swap(target: Path, aside: Path) -> None:
    """Wait for another run to finish swapping ``target`` in; one UserError line if it does not."""
    deadline = time.monotonic() + SWAP_WAIT_S
    while not target.exists():
        if time.monotonic() > deadline:
            raise UserError(f"{target}: another annotate run is replacing it (the previous copy is aside as "
                            f"{aside.name}); run this again when that run has finished")
        time.sleep(0.05)
