"""Writing a safetensors file, with the library's failures as one line.

safetensors reports an I/O failure (a full disk, a read-only folder) as its own ``SafetensorError``,
not an ``OSError``, so the CLI's handling of a full disk never saw it and a traceback came out
(under torch's ``[rank0]:`` prefix once the process group is up). Both writers of safetensors in a
trace run — the preset checkpoint (annotate/trace/model/runtime.py) and the trace's tensors
(annotate/trace/format/store.py) — go through :func:`save_tensors`.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from annotate.errors import UserError


def save_tensors(path: Path, tensors: dict[str, Any], label: str, kept: str,
                 metadata: dict[str, str] | None = None) -> None:
    """`safetensors.torch.save_file(tensors, path)`; a failure is one UserError naming `label` and the
    reason, ending with `kept` (what is left as it was)."""
    from safetensors import SafetensorError
    from safetensors.torch import save_file

    try:
        save_file(tensors, str(path), metadata=metadata)
    except (SafetensorError, OSError) as exc:
        raise UserError(f"{label}: cannot write {path.name} ({io_reason(exc)}); free space (or make it writable) "
                        f"and run again; {kept}") from None


def io_reason(exc: BaseException) -> str:
    """The operating system's words inside a safetensors error (`No space left on device`), else its first line."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    text = str(exc)
    m = re.search(r'message: "([^"]+)"', text)
    return m.group(1) if m else (text.splitlines() or [type(exc).__name__])[0][:120]
