"""Benchmark: `annotate budget`'s prediction beside the memory a real CPU trace takes, in one run.

For each shape (the tiny preset, and the qwen3-0.6b shape at 4 layers), one child process imports
everything a trace imports, reads its own peak resident set (``ru_maxrss``), then runs
``annotate trace`` through ``annotate.cli.main`` on the CPU; the parent reads the child's peak from
``resource.getrusage(RUSAGE_CHILDREN)`` once it has exited (each shape under its own parent: that
figure is the largest of every child waited for). Measured growth = the trace's peak − the peak
before it; predicted = :func:`annotate.trace.model.budget.estimate` for that shape on the CPU (the model
of annotate/trace/model/budget.py, its layout the code's: identification and HF's lines on the trace's
device). Host memory also holds what a device would not (the peer's values, which go to the host,
Python's own objects, Inductor's compiler), so the ratio says how much of a CPU run the model
covers; ``beyond tiny`` compares the growth beyond the tiny trace's (mostly the process's own).
Writes bench/results/budget.json ({"bench": "budget", …, "rows": [flat records]}, a table of
docs/guide/performance.md); ``--out PATH`` to write elsewhere. Benchmarks print and write; they never
assert.
"""
from __future__ import annotations

import argparse
import json
import platform
import resource
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "budget.json"
#: (preset, layers, tokens) measured; tokens None: the preset's default prompt length
SHAPES = (("tiny", 4, 12), ("qwen3-0.6b", 4, 32))
DTYPE = "bfloat16"
MIB = 2**20

_CHILD = r"""
import json, resource, sys
import torch, transformers  # noqa: F401  (imported before the first reading, as the trace would)
from annotate.cli import main
from annotate.trace import pipeline  # noqa: F401
from annotate.trace.identify import reference, hf_lines
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
rc = main(sys.argv[1:])
print(json.dumps({"rc": rc, "before_kib": before}))
"""


def one(preset: str, layers: int, tokens: int, out: Path) -> dict[str, Any]:
    """Run one trace in a child and measure it (called in a process of its own: see the module docstring)."""
    argv = ["--root", str(ROOT), "trace", "--preset", preset, "--layers", str(layers), "--tokens", str(tokens),
            "--dtype", DTYPE, "--out", str(out), "--force", "--quiet"]
    proc = subprocess.run([sys.executable, "-c", _CHILD, *argv], cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"bench_budget: the trace of {preset} failed: {proc.stderr.strip().splitlines()[-1:]}")
    child = json.loads(proc.stdout.strip().splitlines()[-1])
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss   # Linux: KiB
    return {"before_kib": child["before_kib"], "peak_kib": peak_kib}


def row(preset: str, layers: int, tokens: int, measured: dict[str, Any]) -> dict[str, Any]:
    from annotate.trace.model import budget, runtime
    from annotate.trace.model.options import PRESETS

    config = runtime.preset_config(PRESETS[preset], layers, DTYPE)
    b = budget.estimate(config, layers, tokens, DTYPE, "cpu")
    growth = (measured["peak_kib"] - measured["before_kib"]) * 1024
    return {"shape": f"{preset} {layers}L {tokens}T", "dtype": DTYPE,
            "predicted MiB": round(b.device_memory / MIB, 1), "measured RSS growth MiB": round(growth / MIB, 1),
            "predicted / measured": round(b.device_memory / growth, 3) if growth > 0 else None,
            "peak stage (model)": max(b.stages(), key=lambda k: b.stages()[k])}


def beyond(rows: list[dict[str, Any]]) -> None:
    """Add each row's growth beyond the first (tiny) row's, predicted and measured: the tiny trace's growth is
    almost all the process's own (Inductor's compiler, modules loaded on first use), which the model leaves out."""
    base = rows[0]
    for r in rows:
        extra = r["measured RSS growth MiB"] - base["measured RSS growth MiB"]
        predicted = r["predicted MiB"] - base["predicted MiB"]
        r["beyond tiny: predicted / measured"] = round(predicted / extra, 3) if r is not base and extra > 0 else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--one", nargs=3, metavar=("PRESET", "LAYERS", "TOKENS"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one:   # the per-shape parent: its RUSAGE_CHILDREN sees only this shape's trace
        with tempfile.TemporaryDirectory(prefix="annotate-bench-budget-") as tmp:
            print(json.dumps(one(args.one[0], int(args.one[1]), int(args.one[2]), Path(tmp) / "trace")))
        return 0
    rows = []
    for preset, layers, tokens in SHAPES:
        proc = subprocess.run([sys.executable, __file__, "--one", preset, str(layers), str(tokens)], cwd=ROOT,
                              capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            print(proc.stderr.strip(), file=sys.stderr)
            return 1
        rows.append(row(preset, layers, tokens, json.loads(proc.stdout.strip().splitlines()[-1])))
    beyond(rows)
    for r in rows:
        print(r)
    import torch

    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"bench": "budget", "device": "cpu", "python": platform.python_version(),
                                    "torch": torch.__version__, "rows": rows}, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
