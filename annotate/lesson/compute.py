"""Child process: import the vendored nano-vllm from ROOT, run every claim family, write JSON.

    python -m annotate.lesson.compute ROOT OUT.json

Run in its own process so that (1) the build process never imports torch, (2) each project root
gets a clean ``nanovllm`` import (no stale ``sys.modules`` entries from another root), and (3)
``torch.compile`` is off from the start: the vendored ``@torch.compile`` methods then run their
own bodies eagerly (still the vendored code, without ~20 s of compilation). The build runs it in a
child forked from a server that has only torch and transformers imported (`forked.py`), else as
this command in a fresh interpreter; both give the same JSON (tests/test_forked.py).
"""
from __future__ import annotations

import os

os.environ["TORCHDYNAMO_DISABLE"] = "1"  # before torch is imported: torch.compile becomes a no-op
os.environ["TORCH_COMPILE_DISABLE"] = "1"

import json
import sys
import traceback
from pathlib import Path
from typing import Any, Callable

from annotate.lesson.model import Family

FamilyFn = Callable[[dict[str, Any]], Family]


def families(root: Path) -> dict[str, FamilyFn]:
    """Claim-name prefix -> function computing that family (``traced`` reads traces under ``root``)."""
    from annotate.lesson import counterexamples, rmsnorm, shapes, swiglu, traced

    return {"rmsnorm": rmsnorm.family, "mlp": swiglu.mlp_family, "swiglu": swiglu.swiglu_family,
            "shape": shapes.family, "counter": counterexamples.family,
            "traced": lambda mods: traced.family(mods, root)}


def one_line(exc: BaseException) -> str:
    """``Type: message`` plus the innermost vendored frame, on one line."""
    where = ""
    for frame in traceback.extract_tb(exc.__traceback__):
        if "nanovllm" in frame.filename:
            where = f" (at {frame.filename.split('nanovllm', 1)[-1].lstrip('/')}:{frame.lineno})"
    text = " ".join(str(exc).split()) or "no message"
    return f"{type(exc).__name__}: {text}{where}"


def compute(root: Path) -> dict[str, Any]:
    """{"torch": version, "claims": {name: claim}, "failed": {prefix: one-line error}}."""
    import torch

    from annotate.trace.model.runtime import import_vendored, init_process_group

    result: dict[str, Any] = {"torch": torch.__version__, "claims": {}, "failed": {}}
    try:
        mods = import_vendored(root, "cpu")
        init_process_group()
    except Exception as exc:  # the vendored code does not even import: every family fails
        result["failed"] = {prefix: "importing the vendored code failed: " + one_line(exc) for prefix in families(root)}
        return result
    torch.manual_seed(0)
    for prefix, fn in families(root).items():
        try:
            fam = fn(mods)
        except Exception as exc:
            result["failed"][prefix] = one_line(exc)
            continue
        result["claims"].update({c.name: c.to_json() for c in fam.claims})
    return result


def main(argv: list[str]) -> int:
    root, out = Path(argv[0]), Path(argv[1])
    out.write_text(json.dumps(compute(root), ensure_ascii=False), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
