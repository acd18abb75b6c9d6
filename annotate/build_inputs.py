"""What a site build reads, as one digest: so `annotate build` can tell that nothing changed since the
site it made last, and `make site` with nothing changed does not rebuild it.

The digest covers every byte a build can read: the pages (docs_dir), notes, the map, experiments,
traces (with their tensors), the materialised vendor copies and their locks, the bench results the
performance page is made from, mkdocs.yml, the JS tools' lock (KaTeX), the tool's own sources, and
the versions of Python and of the packages that render (MkDocs, Material, pymdown, Pygments). A
strict build writes it beside its output (:data:`SITE_STAMP`, inside the staged folder, so a site and
its stamp are swapped in together); a later strict build whose digest is the same skips the work.
Hidden entries (staging folders of an interrupted swap, locks, editors' files) are left out: no build
reads them.
"""
from __future__ import annotations

import hashlib
import json
import sys
from importlib import metadata
from pathlib import Path

from annotate.project import Project

#: the file a strict build leaves in its output: the digest of the inputs it was made from
SITE_STAMP = ".annotate-inputs"

#: folders (root-relative, besides docs_dir) whose every file a build may read
_FOLDERS = (Project.NOTES_DIR, Project.MAP_DIR, Project.EXPERIMENTS_DIR, Project.TRACES_DIR,
            Project.VENDOR_DIR, "bench/results", "annotate")
#: single files at the root a build reads
_FILES = ("mkdocs.yml", "package-lock.json", "pyproject.toml")
#: the packages whose versions change what a build writes
_PACKAGES = ("mkdocs", "mkdocs-material", "pymdown-extensions", "pygments", "markdown")
_CHUNK = 1 << 20


def _files(folder: Path) -> list[Path]:
    """Every regular file under ``folder``, hidden entries and compiled caches left out, sorted."""
    if not folder.is_dir():
        return []
    out = []
    for path in folder.rglob("*"):
        parts = path.relative_to(folder).parts
        if any(p.startswith(".") or p == "__pycache__" or p == "_native" for p in parts):
            continue
        if path.is_file():
            out.append(path)
    return sorted(out)


def _file_hash(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fd:
        while chunk := fd.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "absent"


def inputs_digest(project: Project) -> str:
    """sha256 over (path, content hash) of every input file, and the rendering packages' versions."""
    root = project.root
    h = hashlib.sha256()
    h.update(json.dumps({"python": sys.version, **{p: _version(p) for p in _PACKAGES}}, sort_keys=True).encode())
    folders = [project.docs_dir, *(root / f for f in _FOLDERS)]
    paths = [p for folder in folders for p in _files(folder)]
    paths += [root / f for f in _FILES if (root / f).is_file()]
    for path in paths:
        h.update(project.rel(path).encode() + b"\0" + _file_hash(path).encode() + b"\n")
    return h.hexdigest()


def read_stamp(site: Path) -> str | None:
    """The digest a strict build left in ``site``, or None (no stamp, unreadable, or not a build of ours)."""
    try:
        return (site / SITE_STAMP).read_text(encoding="utf-8").strip() or None
    except (OSError, UnicodeDecodeError):
        return None


def write_stamp(site: Path, digest: str) -> None:
    """Leave ``digest`` in a staged output folder (before it is swapped in)."""
    (site / SITE_STAMP).write_text(digest + "\n", encoding="utf-8")
