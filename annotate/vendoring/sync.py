"""`annotate vendor sync`: materialise each upstream's vendor folder from its lock's source, verified, atomically.

Every function takes the upstream (:class:`annotate.vendoring.registry.Vendor`) it works on; the
default is nano-vllm, so ``sync(root)`` is what it always was. :func:`vendored_files` covers every
upstream the registry lists.
"""
from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Mapping

from annotate import guard
from annotate.atomic import DIR_MODE, replace_dir
from annotate.errors import UserError
from annotate.project import Project
from annotate.vendoring.lock import Lock, read_lock, sha256_bytes, write_lock
from annotate.vendoring.registry import NANO_VLLM, Vendor, vendors
from annotate.vendoring.sources import fetch

WHEEL_CACHE_DIR = f"{Project.CACHE_DIR}/wheels"


@dataclass(frozen=True)
class SyncResult:
    """What sync did: ``changed`` False means everything was in place and verified."""

    changed: bool
    files: int
    restored: tuple[str, ...] = ()  # files that differed from the lock (hand edits, missing) and were rewritten
    lock_updated: bool = False


def local_paths(vendor: Path) -> list[str]:
    """Vendor-relative posix paths of every regular file under the vendor folder (sorted).

    Never through a symbolic link (a link to /etc/passwd is not a vendored file), never
    ``__pycache__`` or the output marker.
    """
    return [rel for rel, is_link in _walk(vendor) if not is_link]


def _walk(vendor: Path) -> list[tuple[str, bool]]:
    """(vendor-relative path, is a symbolic link) of every entry that is a file or a link, sorted."""
    if not vendor.is_dir():
        return []
    found = []
    for folder, dirs, names in os.walk(vendor, followlinks=False):
        here = Path(folder)
        for d in list(dirs):
            if d == "__pycache__":
                dirs.remove(d)
            elif (here / d).is_symlink():
                found.append(((here / d).relative_to(vendor).as_posix(), True))
        for name in names:
            path = here / name
            rel = path.relative_to(vendor).as_posix()
            if rel != guard.OUTPUT_MARKER:
                found.append((rel, path.is_symlink()))
    return sorted(found)


def verify_all(root: Path) -> None:
    """:func:`verify_vendored` for every upstream."""
    for vendor in vendors(root):
        verify_vendored(root, read_lock(root / vendor.lock_name), vendor)


def walk_vendor(root: Path, upstream: Vendor = NANO_VLLM) -> list[tuple[str, bool]]:
    """(vendor-relative path, is a symbolic link) of every entry of one upstream's folder, sorted ([] when
    the folder is missing): what a build walks once and hands to :func:`verify_vendored`."""
    return _walk(root / upstream.dir)


def verify_vendored(root: Path, lock: Lock, upstream: Vendor = NANO_VLLM,
                    walked: list[tuple[str, bool]] | None = None, data: Mapping[str, bytes] | None = None) -> None:
    """What a strict build publishes must be exactly what the lock vouches for: same files, same sha256.

    One line naming the first file that is a link, extra, missing or changed, with the fix. ``walked``
    (from :func:`walk_vendor`) and ``data`` (the bytes of its files) are what the caller already read:
    the very bytes it will publish, so nothing is walked or read twice.
    """
    folder, lock_name = upstream.dir, upstream.lock_name
    vendor = root / folder
    fix = "run `annotate vendor sync` to restore the vendored copy the lock pins"
    if not vendor.is_dir():
        raise UserError(f"{folder}: the vendored copy is missing; {fix}{_stray_hint(upstream)}")
    recorded = lock.source.files
    if not recorded:
        raise UserError(f"{lock_name}: records no sha256 of the vendored files; {fix}")
    seen = set()
    for rel, is_link in _walk(vendor) if walked is None else walked:
        if is_link:
            raise UserError(f"{folder}/{rel}: is a symbolic link, not a vendored file; {fix}")
        if rel not in recorded:
            raise UserError(f"{folder}/{rel}: not in {lock_name}; {fix}")
        if sha256_bytes((vendor / rel).read_bytes() if data is None else data[rel]) != recorded[rel]:
            raise UserError(f"{folder}/{rel}: sha256 differs from {lock_name} (edited?); {fix}")
        seen.add(rel)
    missing = sorted(set(recorded) - seen)
    if missing:
        raise UserError(f"{folder}/{missing[0]}: missing; {fix}")


def local_hashes(vendor: Path) -> dict[str, str]:
    """sha256 of every file under the vendor folder (vendor-relative posix paths)."""
    return {rel: sha256_bytes((vendor / rel).read_bytes()) for rel in local_paths(vendor)}


def vendored_files(root: Path) -> list[str]:
    """The materialised vendored files of project ``root``, every upstream's, the primary's first.

    A missing copy is one error with the fix.
    """
    found: list[str] = []
    for upstream in vendors(root):
        require_copy(root, upstream)
        found += local_paths(root / upstream.dir)
    return found


def require_copy(root: Path, upstream: Vendor) -> None:
    """One error with the fix when an upstream's vendored copy is not there."""
    vendor = root / upstream.dir
    if not vendor.is_dir():
        raise UserError(f"{vendor}: the vendored copy is missing; run `annotate vendor sync`{_stray_hint(upstream)}")


def _stray_hint(upstream: Vendor) -> str:
    """A missing copy of an upstream other than nano-vllm may come from a stray lock (a copy, a backup
    named ``*.lock.json``): name that lock, since every lock under vendor/ is an upstream."""
    return "" if upstream.primary else f" (or, if {upstream.lock_name} is stray, delete it)"


def drift(vendor: Path, recorded: dict[str, str]) -> list[str]:
    """Entries that are not what the lock records: edited, missing or extra files, and symbolic links
    (which :func:`verify_vendored` refuses too, so sync must replace them)."""
    walked = _walk(vendor)
    have = {rel: sha256_bytes((vendor / rel).read_bytes()) for rel, is_link in walked if not is_link}
    changed = [p for p, h in recorded.items() if have.get(p) != h]
    extra = [rel for rel, is_link in walked if is_link or rel not in recorded]
    return sorted(set(changed + extra))


@contextlib.contextmanager
def vendor_writer(root: Path, upstream: Vendor = NANO_VLLM) -> Iterator[None]:
    """Guard and lock one vendor folder for one writing run (sync or update); sweep a killed run's leftovers.

    The vendored copy may hold hand edits (sync restores them), but never git-tracked files; a lock
    file keeps a second run off it; a temp lock file a killed `vendor update` left is removed, and a
    `vendor update` killed between its two renames (new folder in, lock not yet) is rolled back.
    """
    vendor = root / upstream.dir
    guard.refuse_unsafe_output(root, vendor, "vendor folder", ours=lambda _: True, home=Project.VENDOR_DIR)
    # the lock changes with the folder: a `vendor update` killed between its two renames is undone here
    with guard.output_lock(root, vendor, "vendor folder", paired=root / upstream.lock_name):
        yield


def sync(root: Path, lock: Lock | None = None, upstream: Vendor = NANO_VLLM) -> SyncResult:
    """Make the vendor folder exactly what the lock's source gives; a no-op (still verified) when it is."""
    with vendor_writer(root, upstream):
        return _sync(root, lock, upstream)


def _sync(root: Path, lock: Lock | None, upstream: Vendor) -> SyncResult:
    lock_path = root / upstream.lock_name
    lock = lock or read_lock(lock_path)
    vendor = root / upstream.dir
    recorded = lock.source.files
    restored = tuple(drift(vendor, recorded)) if vendor.is_dir() and recorded else ()
    if recorded and vendor.is_dir() and not restored:
        _open_up(vendor)
        return SyncResult(changed=False, files=len(recorded))
    files = fetch(lock.source, root / WHEEL_CACHE_DIR)
    hashes = verify(files, lock, upstream.lock_name)
    stage(files, vendor)
    lock_updated = not recorded
    if lock_updated:
        write_lock(lock_path, Lock(lock.upstream, lock.source.with_files(hashes)))
    return SyncResult(changed=True, files=len(files), restored=restored, lock_updated=lock_updated)


def _open_up(vendor: Path) -> None:
    """A copy staged by a version before 2026-12 landed as mkdtemp's 0700 (only its writer could read it):
    give exactly that mode the one an ordinary folder gets; any other mode is the user's choice."""
    if vendor.stat().st_mode & 0o777 == 0o700 != DIR_MODE:
        os.chmod(vendor, DIR_MODE)


def verify(files: dict[str, bytes], lock: Lock, lock_name: str = NANO_VLLM.lock_name) -> dict[str, str]:
    """Check the fetched files against the lock; return their sha256s."""
    missing = sorted(set(lock.upstream.files) - set(files))
    if missing:
        raise UserError(f"{lock.source.describe()}: lacks {missing[0]}"
                        f"{f' and {len(missing) - 1} more' if len(missing) > 1 else ''} listed in {lock_name}; "
                        "pin a source that has every upstream file")
    hashes = {p: sha256_bytes(b) for p, b in files.items()}
    if lock.source.files:
        wrong = sorted(p for p in set(hashes) | set(lock.source.files) if hashes.get(p) != lock.source.files.get(p))
        if wrong:
            raise UserError(f"{lock.source.describe()}: {wrong[0]} does not match the sha256 in {lock_name}; "
                            "the source changed under the pin: re-pin with `annotate vendor update`")
    return hashes


def stage(files: dict[str, bytes], vendor: Path, then: Callable[[], None] | None = None) -> None:
    """Write all files into a temp folder beside ``vendor``, then swap it in with renames.

    ``then`` runs once the new folder is in place (vendor update renames its staged lock there);
    if it fails, the previous folder is put back. Either way no temp folder is left behind.
    """
    with replace_dir(vendor, then) as staged:
        for rel, data in sorted(files.items()):
            write_file(staged / rel, data)


def write_file(path: Path, data: bytes) -> None:
    """One file of a staged folder (private to this run, so a plain write is enough)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
