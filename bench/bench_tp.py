"""Benchmark: a --tp 2 trace — the recorder's overhead on each rank, and the whole run's wall time.

Two ranks (gloo, CPU, two processes, the launcher's own rendezvous and group set-up), each with the
vendored model of the tiny preset (or --preset), compiled once, then ROUNDS rounds in one shuffled
order that every rank follows (the all_reduces pair them up):
  off       the plain prefill on 2 ranks (compiled functions, the all_reduces, no tracing)
  recorded  the same prefill under the line recorder with the tensor-parallel forwards traced and
            the compiled bodies' eager replays (what `annotate trace --tp 2` records)
Each round starts with a barrier so the ranks start together. Rank 0 prints the ratio of medians and
the median of per-round ratios. Then one whole `annotate trace --tp 2` in a fresh process: its wall
time and rank 0's breakdown, and the unrecorded TP=2 forward as a share of it.
Benchmarks print; they never assert timing.
"""
from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from annotate.trace.model.options import TraceOptions  # noqa: E402
from annotate.trace.parallel import Rendezvous, free_port, join_group  # noqa: E402

ROUNDS = 20
TP = 2


def rank(r: int, rv: Rendezvous, preset: str, out: Path) -> None:
    """One rank: build, compile, then the shuffled rounds; rank 0 writes its timings to `out`."""
    import torch.distributed as dist

    from annotate.trace.model import runtime
    from annotate.trace.record.recorder import Recorder

    join_group(r, rv, "cpu")
    rt = runtime.build_runtime(TraceOptions(preset=preset, root=ROOT, tp=TP))
    mods = runtime.import_vendored(ROOT, "cpu")
    runtime.run_prefill(rt)   # compile
    rec = Recorder(rt.model, mods, runtime.vendor_root(ROOT), parallel=True)
    times: dict[str, list[float]] = {"off": [], "recorded": []}

    def once(mode: str) -> float:
        dist.barrier()
        t0 = time.perf_counter()
        if mode == "off":
            runtime.run_prefill(rt)
        else:
            rec.install()
            rec.reset()
            with rec.recording():
                runtime.run_prefill(rt)
            rec.uninstall()
        return time.perf_counter() - t0

    once("off"), once("recorded")   # warm-up
    order = random.Random(0)   # the same order on every rank
    for _ in range(ROUNDS):
        modes = ["off", "recorded"]
        order.shuffle(modes)
        for m in modes:
            times[m].append(once(m))
    if r == 0:
        out.write_text(json.dumps(times), encoding="utf-8")
    dist.barrier()
    rt.close()
    dist.destroy_process_group()


def overhead(preset: str) -> float:
    """Recorded vs plain TP=2 prefill on 2 ranks; returns the plain median (s)."""
    import multiprocessing

    rv = Rendezvous("gloo", f"tcp://127.0.0.1:{free_port()}", TP)
    ctx = multiprocessing.get_context("spawn")
    with tempfile.TemporaryDirectory(prefix="bench-tp-") as tmp:
        out = Path(tmp) / "times.json"
        procs = [ctx.Process(target=rank, args=(r, rv, preset, out)) for r in range(TP)]
        for p in procs:
            p.start()
        for p in procs:
            p.join()
        if any(p.exitcode != 0 for p in procs):
            raise SystemExit(f"a rank failed: exit codes {[p.exitcode for p in procs]}")
        times = json.loads(out.read_text(encoding="utf-8"))
    off, recd = statistics.median(times["off"]), statistics.median(times["recorded"])
    per_round = statistics.median(b / a for a, b in zip(times["off"], times["recorded"]))
    print(f"TP={TP} prefill, preset {preset}, {ROUNDS} rounds, rank 0:")
    print(f"  off       median {off * 1e3:8.2f} ms")
    print(f"  recorded  median {recd * 1e3:8.2f} ms   ratio of medians {recd / off:6.2f}   "
          f"median per-round ratio {per_round:6.2f}")
    return off


def whole_run(preset: str, off: float) -> None:
    """`annotate trace --tp 2` in a fresh process: wall time and rank 0's breakdown."""
    with tempfile.TemporaryDirectory(prefix="bench-tp-") as tmp:
        out = Path(tmp) / "trace"
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "annotate", "--root", str(ROOT), "trace", "--preset", preset,
                        "--tp", str(TP), "--out", str(out), "--quiet"], check=True, stdout=subprocess.DEVNULL)
        wall = time.perf_counter() - t0
        timings = json.loads((out / "trace.json").read_text(encoding="utf-8"))["meta"]["timings"]
    print(f"annotate trace --preset {preset} --tp {TP}: wall {wall:.2f} s "
          f"({wall / off:.0f}× one unrecorded TP={TP} prefill); rank 0's steps:")
    for k, v in timings.items():
        print(f"  {k:<12} {v:8.2f} s  {100 * v / wall:5.1f} % of the wall time")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--preset", default="tiny")
    args = p.parse_args()
    off = overhead(args.preset)
    whole_run(args.preset, off)


if __name__ == "__main__":
    main()
