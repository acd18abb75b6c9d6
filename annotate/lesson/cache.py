"""Where computed claims live between builds, and how they are (re)computed.

The key is a sha256 over the vendored files the computation imports (every ``.py`` under
``vendor/nano-vllm/nanovllm``: the families import ``qwen3.py``, which imports all the layers), the
claim code itself (``annotate/lesson/*.py``) and the trace code it reads through (``annotate/trace/**/*.py``),
the trace files under ``traces/`` (the ``traced`` family reads them) and the installed torch version.
The result is stored as ``.cache/claims-<key>.json`` under the project root, written atomically; the
files of earlier keys are then removed. Any edit to a vendored file gives a new key, so a stale number
is never served.
"""
from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path
from typing import Any

from annotate.atomic import atomic_write_text
from annotate.errors import UserError
from annotate.lesson import forked
from annotate.project import Project
from annotate.vendoring.lock import VENDOR_DIR

#: a cache file's name, its key in the braces (:func:`cache_path` fills it, :func:`prune` globs it)
_NAME = "claims-{}.json"
#: nano-vllm's Python package inside its vendor folder (the package's name is a fact of the upstream)
VENDOR_PACKAGE = Path(VENDOR_DIR) / "nanovllm"
CLAIMS_FORMAT = 1
TIMEOUT_S = 300


def involved_files(root: Path) -> list[Path]:
    """The vendored sources the computation imports, sorted (UserError when the vendor is missing)."""
    package = root / VENDOR_PACKAGE
    files = sorted(package.rglob("*.py")) if package.is_dir() else []
    if not files:
        raise UserError(f"{package}: vendored nano-vllm is missing, so the lesson's numbers cannot be "
                        "computed; run `annotate vendor sync` first")
    return files


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _torch_version() -> str:
    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return "none"


def cache_key(root: Path) -> str:
    """sha256 over (path, sha256) of the involved vendored files, the claim and trace code, the trace files
    and torch's version."""
    h = hashlib.sha256(f"annotate-claims {CLAIMS_FORMAT} torch {_torch_version()}\n".encode())
    for path in involved_files(root):
        h.update(f"vendor {path.relative_to(root).as_posix()} {_sha256(path)}\n".encode())
    for path in code_files():
        h.update(f"code {path.relative_to(_PACKAGE).as_posix()} {_sha256(path)}\n".encode())
    for path in trace_files(root):
        h.update(f"trace {path.relative_to(root).as_posix()} {_sha256(path)}\n".encode())
    return h.hexdigest()


_PACKAGE = Path(__file__).resolve().parents[1]


def code_files() -> list[Path]:
    """The claim code (``annotate/lesson/``) and the trace code the ``traced`` family reads through
    (``annotate/trace/``: the trace reader, the checkpoint's weights it regenerates, the ulp maths)."""
    return sorted(p for sub in ("lesson", "trace") for p in (_PACKAGE / sub).rglob("*.py"))


def trace_files(root: Path) -> list[Path]:
    """The files of every trace under ``traces/`` (a re-trace must recompute the ``traced`` claims)."""
    from annotate.trace.format.store import find_traces

    return sorted(f for d in find_traces(root) for f in d.iterdir() if f.is_file())


def cache_path(root: Path, key: str) -> Path:
    return root / Project.CACHE_DIR / _NAME.format(key)


def read_cached(path: Path) -> dict[str, Any] | None:
    """The cached result, or None when absent or unreadable (it is then recomputed)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) and data.get("format") == CLAIMS_FORMAT else None


def run_child(root: Path) -> dict[str, Any]:
    """Run :mod:`annotate.lesson.compute` for `root` outside this process and return its JSON: in a child of
    the claims' fork server (`forked.py`: torch and transformers already imported, ~1 s after a process's
    first), else in a fresh interpreter."""
    with tempfile.TemporaryDirectory(prefix="annotate-claims-") as tmp:
        out, log = Path(tmp) / "claims.json", Path(tmp) / "claims.log"
        rc = _forked_or_fresh(root, out, log)
        if rc is None:
            raise UserError(f"{root / VENDOR_PACKAGE}: computing the lesson's claims took over {TIMEOUT_S} s; "
                            "run `python -m annotate.lesson.compute . out.json` to see why")
        if rc != 0 or not out.is_file():
            said = log.read_text(encoding="utf-8", errors="replace").strip().splitlines() if log.is_file() else []
            tail = (said or ["no output"])[-1]
            raise UserError(f"{root / VENDOR_PACKAGE}: computing the lesson's claims failed ({tail}); "
                            "run `python -m annotate.lesson.compute . out.json` to see the traceback")
        data = json.loads(out.read_text(encoding="utf-8"))
    data["format"] = CLAIMS_FORMAT
    return data


def _forked_or_fresh(root: Path, out: Path, log: Path) -> int | None:
    """The computation's exit code (None: past TIMEOUT_S) in a forked child, or in a fresh interpreter where the
    platform cannot fork or the server failed (it is stopped; the next computation starts another)."""
    if forked.available():
        try:
            return forked.compute_in_child(root.resolve(), out, log, TIMEOUT_S)
        except (OSError, RuntimeError, ValueError):
            pass
    return _fresh_interpreter(root, out, log)


def _fresh_interpreter(root: Path, out: Path, log: Path) -> int | None:
    """`python -m annotate.lesson.compute ROOT OUT` in a fresh interpreter, its output in `log`; its exit code,
    or None when it ran past TIMEOUT_S."""
    cmd = [sys.executable, "-m", "annotate.lesson.compute", str(root.resolve()), str(out)]
    with log.open("w", encoding="utf-8") as sink:
        try:
            return subprocess.run(cmd, cwd=root, env=forked.child_env(), stdout=sink, stderr=subprocess.STDOUT,
                                  timeout=TIMEOUT_S).returncode
        except subprocess.TimeoutExpired:
            return None


def load_claims(root: Path) -> tuple[str, dict[str, Any]]:
    """(key, computed result) from the cache, computing and caching it on a miss."""
    key = cache_key(root)
    path = cache_path(root, key)
    data = read_cached(path)
    if data is None:
        data = run_child(root)
        atomic_write_text(path, json.dumps(data, ensure_ascii=False, indent=1))
        prune(path)
    return key, data


def prune(keep: Path) -> None:
    """Remove the cache files of earlier keys beside ``keep`` (no key comes back once its inputs changed,
    short of undoing an edit; each file is ~100 KB and they used to pile up, one per edit or re-trace)."""
    for old in keep.parent.glob(_NAME.format("*")):
        if old != keep:
            old.unlink(missing_ok=True)
