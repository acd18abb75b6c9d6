"""Benchmark: a full-depth `annotate trace` stage by stage, before (issue 33's baseline) and after, in one run.

The shape is issue 33's CPU one: the qwen3-0.6b preset at its full 28 layers, 32 tokens, bfloat16, CPU.
"Before" is the project at :data:`BASELINE` (the commit whose full-depth times issue 33 reports), checked out
with `git worktree add` into a temp folder; "after" is this checkout. Each run is a fresh process
(`python -m annotate --root ROOT trace …`, the package imported from that side's folder, checked), with
``ANNOTATE_NATIVE=0`` on both sides (the baseline checkout has no compiled recorder: both record in Python),
both reading this checkout's vendor/ and sharing Inductor's disk cache.

First one untimed warm-up run per side (Inductor's cache, and the after side's cache of the generated
checkpoint, `annotate/trace/model/runtime.py`: what any second trace of a shape finds); its times are kept as the
``cold`` rows. Then ``--rounds N`` rounds (default 2), each running both sides in a shuffled order, so background
load on a shared machine hits them alike. Per side: the median of each stage's seconds (the trace's own
``meta.timings``), of the process's wall time (start and imports included) and of its CPU time (user + system,
from the children's rusage: what other processes take of the machine is left out). The ``before / after``
row is the median of the per-round ratios. Writes bench/results/depth.json ({"bench": "depth", …,
"rows": [flat records]}, a table of docs/guide/performance.md); ``--out PATH`` to write elsewhere.
Benchmarks print and write; they never assert timing.
"""
from __future__ import annotations

import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
#: the commit issue 33 measured (its full-depth H200 run was made at it)
BASELINE = "b5ccc61"
PRESET, LAYERS, TOKENS = "qwen3-0.6b", 28, 32
STAGES = ("build", "compile", "record", "reference", "identify", "hf lines", "write")
ROUNDS = 2
RESULTS = ROOT / "bench" / "results" / "depth.json"


def baseline_checkout(tmp: Path) -> Path:
    """A detached `git worktree` of :data:`BASELINE` under `tmp` (removed by :func:`drop_checkout`)."""
    folder = tmp / "baseline"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "--quiet", str(folder), BASELINE],
                   check=True)
    return folder


def drop_checkout(folder: Path) -> None:
    subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(folder)], check=False)


def _env(code: Path) -> dict[str, str]:
    return {**os.environ, "ANNOTATE_NATIVE": "0", "PYTHONPATH": str(code)}


def imported_from(code: Path) -> Path:
    """Where a process started like a traced run imports `annotate` from (it must be `code`)."""
    proc = subprocess.run([sys.executable, "-c", "import annotate; print(annotate.__file__)"], cwd=code,
                          env=_env(code), capture_output=True, text=True, check=True)
    return Path(proc.stdout.strip()).resolve().parent.parent


def run_trace(code: Path, out: Path) -> dict[str, Any]:
    """One `annotate trace` of the shape with the package in `code`: wall and CPU seconds, stage times, and
    what it recorded (records, identity statuses)."""
    cmd = [sys.executable, "-m", "annotate", "--root", str(ROOT), "trace", "--preset", PRESET,
           "--layers", str(LAYERS), "--tokens", str(TOKENS), "--out", str(out), "--force", "--quiet"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=code, env=_env(code), capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode:
        raise SystemExit(f"bench_depth: {' '.join(cmd)} (in {code}) failed:\n{proc.stderr[-2000:]}")
    payload = json.loads((out / "trace.json").read_text(encoding="utf-8"))
    statuses: dict[str, int] = {}
    for rec in payload["records"]:
        for var in rec["vars"]:
            status = var["identity"].get("status", "?")
            statuses[status] = statuses.get(status, 0) + 1
    timings = payload["meta"]["timings"]
    return {"wall_s": wall, "cpu_s": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
            "stages": {s: float(timings.get(s, 0.0)) for s in STAGES}, "records": len(payload["records"]),
            "statuses": statuses}


def side_row(side: str, commit: str, runs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    """One side's medians as a flat row."""
    med = statistics.median
    row: dict[str, Any] = {"bench": "depth", "shape": f"{PRESET} {LAYERS}L {TOKENS}T", "device": "cpu",
                           "side": side, "commit": commit, "runs": kind}
    row.update({f"{s}_s": round(med(r["stages"][s] for r in runs), 2) for s in STAGES})
    row["stages_s"] = round(med(sum(r["stages"].values()) for r in runs), 2)
    row["wall_s"] = round(med(r["wall_s"] for r in runs), 2)
    row["cpu_s"] = round(med(r["cpu_s"] for r in runs), 2)
    row["records"] = runs[-1]["records"]
    row["statuses"] = ", ".join(f"{k} {v}" for k, v in sorted(runs[-1]["statuses"].items()))
    row["rounds"] = len(runs)
    return row


def ratio_row(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> dict[str, Any]:
    """Before / after, per stage and in all: the median of the per-round ratios."""
    med = statistics.median

    def ratio(get: Any) -> float:
        return round(med(get(b) / max(get(a), 1e-9) for b, a in zip(before, after)), 2)

    row: dict[str, Any] = {"bench": "depth", "shape": f"{PRESET} {LAYERS}L {TOKENS}T", "device": "cpu",
                           "side": "before / after", "commit": None, "runs": "ratio"}
    row.update({f"{s}_s": ratio(lambda r, s=s: r["stages"][s]) for s in STAGES})
    row["stages_s"] = ratio(lambda r: sum(r["stages"].values()))
    row["wall_s"] = ratio(lambda r: r["wall_s"])
    row["cpu_s"] = ratio(lambda r: r["cpu_s"])
    row["rounds"] = len(before)
    return row


def _head() -> str:
    return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True).stdout.strip() + (" + working tree" if _dirty() else "")


def _dirty() -> bool:
    return bool(subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip())


def main(argv: list[str]) -> None:
    rounds = int(argv[argv.index("--rounds") + 1]) if "--rounds" in argv else ROUNDS
    results = Path(argv[argv.index("--out") + 1]) if "--out" in argv else RESULTS
    head = _head()
    with tempfile.TemporaryDirectory(prefix="annotate-bench-depth-") as tmp:
        base = baseline_checkout(Path(tmp))
        try:
            sides = {"before": base, "after": ROOT}
            for side, code in sides.items():
                where = imported_from(code)
                if where != code.resolve():
                    raise SystemExit(f"bench_depth: the {side} side imports annotate from {where}, not {code}")
            runs: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
            cold: dict[str, dict[str, Any]] = {}
            for n in range(rounds + 1):
                order = list(sides)
                random.shuffle(order)
                for side in order:
                    got = run_trace(sides[side], Path(tmp) / f"{side}-{n}")
                    print(f"round {n}{' (warm-up)' if n == 0 else ''} {side}: {got['wall_s']:.1f} s wall, "
                          f"{got['cpu_s']:.1f} s CPU; " + ", ".join(f"{s} {t:.1f}" for s, t in got["stages"].items()),
                          flush=True)
                    if n == 0:
                        cold[side] = got
                    else:
                        runs[side].append(got)
        finally:
            drop_checkout(base)
    rows = [side_row("before", BASELINE, [cold["before"]], "cold (first run)"),
            side_row("after", head, [cold["after"]], "cold (first run)"),
            side_row("before", BASELINE, runs["before"], "warm (median)"),
            side_row("after", head, runs["after"], "warm (median)"),
            ratio_row(runs["before"], runs["after"])]
    import torch

    data = {"bench": "depth", "device": "cpu", "threads": torch.get_num_threads(), "python": sys.version.split()[0],
            "torch": torch.__version__, "recorder": "python (ANNOTATE_NATIVE=0, both sides)", "rows": rows}
    results.parent.mkdir(parents=True, exist_ok=True)
    results.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    for row in rows:
        print(json.dumps(row, ensure_ascii=False))
    print(f"end to end (stage sum), before / after: {rows[-1]['stages_s']}×; wall {rows[-1]['wall_s']}×; "
          f"CPU {rows[-1]['cpu_s']}× → {results}")


if __name__ == "__main__":
    main(sys.argv[1:])
