"""Facts a trace carries about where it came from: vendor pin and hashes, versions, device, tool."""
from __future__ import annotations

import hashlib
import platform
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from annotate.errors import UserError
from annotate.vendoring.lock import LOCK_NAME, VENDOR_DIR, line_hashes, read_lock, sha256_bytes
from annotate.vendoring.sync import local_paths

if TYPE_CHECKING:   # torch is imported where it is used: the freshness check (annotate/trace/freshness.py) runs without it
    import torch


def vendor_hashes(root: Path, folder: Path | None = None) -> tuple[dict[str, str], dict[str, list[str]]]:
    """The sha256 of every vendored file, and per vendored Python file the hash of every line (the
    lock's scheme): how a trace, which holds no source text, finds its statements again on later
    bytes (annotate/trace/format/placement.py). Each file is read once for both. ``folder`` replaces
    vendor/nano-vllm (an experiment's edited copy: the facts are those of the bytes really traced)."""
    vendor = folder or root / VENDOR_DIR
    files: dict[str, str] = {}
    lines: dict[str, list[str]] = {}
    for rel in local_paths(vendor):   # sorted
        data = (vendor / rel).read_bytes()
        files[rel] = sha256_bytes(data)
        if rel.endswith(".py"):
            lines[rel] = line_hashes(data)
    return files, lines


def vendor_facts(root: Path, folder: Path | None = None) -> dict[str, Any]:
    """Upstream pin and source from the lock (if present) plus the sha256 of every local vendored file.

    `mismatched` lists files whose local bytes differ from the lock's `source.files` hash (or that
    one side lacks); a missing lock is reported as `lock: null`, not an error, an unreadable or
    invalid one as `lock: "unreadable: <why>"`.
    """
    local, lines = vendor_hashes(root, folder)
    lock_path = root / LOCK_NAME
    facts: dict[str, Any] = {"root": VENDOR_DIR, "files": local, "line_hashes": lines,
                             "lock": None, "upstream": None, "source": None, "mismatched": None}
    if lock_path.is_file():
        try:
            lock = read_lock(lock_path)
        except (UserError, OSError, ValueError) as exc:
            facts["lock"] = f"unreadable: {exc}"
            return facts
        up = lock.upstream
        facts["lock"] = LOCK_NAME
        facts["upstream"] = {"repo": up.repo, "commit": up.commit, "committed": up.committed or None}
        facts["source"] = {k: v for k, v in lock.source.to_json().items() if k != "files"}
        pinned = lock.source.files
        facts["mismatched"] = sorted(k for k in set(pinned) | set(local) if pinned.get(k) != local.get(k))
    return facts


def versions() -> dict[str, str | None]:
    """python / torch / triton / transformers / safetensors versions in this process."""
    import torch

    out: dict[str, str | None] = {"python": platform.python_version(), "torch": torch.__version__}
    for name in ("triton", "transformers", "safetensors"):
        try:
            out[name] = __import__(name).__version__
        except Exception:  # not installed or broken: record that, don't fail the trace
            out[name] = None
    return out


def device_name(device: torch.device) -> str:
    """GPU name, or the CPU model from /proc/cpuinfo (platform string as fallback)."""
    if device.type == "cuda":
        import torch

        return torch.cuda.get_device_name(device)
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def tool_hash() -> str:
    """sha256 over annotate/trace/**/*.py (each file under its path in the package): a changed recorder
    makes an old trace stale."""
    h = hashlib.sha256()
    package = Path(__file__).resolve().parents[1]
    for p in sorted(package.rglob("*.py")):
        h.update(p.relative_to(package).as_posix().encode() + b"\0" + p.read_bytes())
    return h.hexdigest()


def command_line() -> str:
    """How this process was invoked (for the trace's metadata)."""
    return " ".join([Path(sys.argv[0]).name] + sys.argv[1:])
