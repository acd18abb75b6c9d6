"""Facts a trace carries about where it came from: vendor pin and hashes, versions, device, tool."""
from __future__ import annotations

import hashlib
import json
import platform
import sys
from pathlib import Path
from typing import Any

import torch

LOCK_REL = Path("vendor") / "nano-vllm.lock.json"


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def vendor_facts(root: Path) -> dict[str, Any]:
    """Upstream pin and source from the lock (if present) plus the sha256 of every local vendored file.

    `mismatched` lists files whose local bytes differ from the lock's `source.files` hash (or that
    one side lacks); a missing lock is reported as `lock: null`, not an error.
    """
    vroot = root / "vendor" / "nano-vllm"
    local = {p.relative_to(vroot).as_posix(): sha256_file(p)
             for p in sorted(vroot.rglob("*")) if p.is_file() and "__pycache__" not in p.parts}
    lock_path = root / LOCK_REL
    facts: dict[str, Any] = {"root": "vendor/nano-vllm", "files": local, "lock": None, "upstream": None,
                             "source": None, "mismatched": None}
    if lock_path.is_file():
        try:
            lock = json.loads(lock_path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            facts["lock"] = f"unreadable: {exc}"
            return facts
        up, src = lock.get("upstream") or {}, lock.get("source") or {}
        facts["lock"] = LOCK_REL.as_posix()
        facts["upstream"] = {"repo": up.get("repo"), "commit": up.get("commit"), "committed": up.get("committed")}
        facts["source"] = {k: v for k, v in src.items() if k != "files"}
        pinned = src.get("files") or {}
        facts["mismatched"] = sorted(k for k in set(pinned) | set(local) if pinned.get(k) != local.get(k))
    return facts


def versions() -> dict[str, str | None]:
    """python / torch / triton / transformers / safetensors versions in this process."""
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
        return torch.cuda.get_device_name(device)
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def tool_hash() -> str:
    """sha256 over annotate/trace/*.py: a changed recorder makes an old trace stale."""
    h = hashlib.sha256()
    for p in sorted(Path(__file__).parent.glob("*.py")):
        h.update(p.name.encode() + b"\0" + p.read_bytes())
    return h.hexdigest()


def command_line() -> str:
    """How this process was invoked (for the trace's metadata)."""
    return " ".join([Path(sys.argv[0]).name] + sys.argv[1:])
