"""Benchmark: the recorder's overhead on the fused path, and the full `annotate trace` breakdown.

Same process, same compiled model, qwen3-0.6b shape cut to 4 layers, 32 tokens, CPU, bfloat16:
  off     the plain prefill (compiled functions, no tracing)
  lines   sys.settrace line recorder only (clones + live variables; compiled calls pass through)
  full    line recorder + clones of every compiled call's inputs/outputs; "fwd" is the forward
          itself (the fused path under recording), "total" adds the eager replays of the compiled
          bodies, which the recorder runs right after the forward
Printed: the ratio of medians, the median of per-round ratios (each recorded run against the plain
run of its own round) and the ratio of minimums; on a shared machine the three bracket the cost.
Fused-vs-eager distances and summaries are computed later, in `identify`. Then one full
`annotate trace` in a fresh process and its time breakdown.
Benchmarks print; they never assert timing.
"""
from __future__ import annotations

import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from annotate.trace import runtime  # noqa: E402
from annotate.trace.recorder import Recorder  # noqa: E402

REPEATS = 40
PRESET, LAYERS, TOKENS = "qwen3-0.6b", 4, 32


def overhead() -> None:
    """Recording on vs off in one process. The modes are interleaved round by round, in a shuffled
    order, so that background load on a shared machine and any after-effect of one mode on the
    next hit them alike. Two statistics: the ratio of medians, and the median of the per-round
    ratios (each recorded run against the plain run of its own round), which drifting load moves
    less."""
    rt = runtime.build_runtime(runtime.TraceOptions(preset=PRESET, layers=LAYERS, tokens=TOKENS, root=ROOT))
    mods = runtime.import_vendored(ROOT, "cpu")
    start = time.perf_counter()
    runtime.run_prefill(rt)
    print(f"first prefill (compile): {time.perf_counter() - start:.2f} s")
    recorders = {"lines": Recorder(rt.model, mods, runtime.vendor_root(ROOT), replay=False),
                 "full": Recorder(rt.model, mods, runtime.vendor_root(ROOT), replay=True)}

    def plain() -> None:
        runtime.run_prefill(rt)

    times: dict[str, list[float]] = {m: [] for m in ("off", "lines", "full fwd", "full total")}

    def plain_timed() -> None:
        t0 = time.perf_counter()
        plain()
        times["off"].append(time.perf_counter() - t0)

    def recorded(mode: str) -> None:
        rec = recorders[mode]
        rec.install()
        rec.reset()
        t0 = time.perf_counter()
        with rec.recording():
            runtime.run_prefill(rt)
            t1 = time.perf_counter()
        t2 = time.perf_counter()
        rec.uninstall()
        if mode == "lines":
            times["lines"].append(t1 - t0)
        else:
            times["full fwd"].append(t1 - t0)
            times["full total"].append(t2 - t0)

    rounds = [plain_timed, lambda: recorded("lines"), lambda: recorded("full")]
    for fn in rounds:
        fn()  # warm-up (wrappers installed once, so any guard change is compiled here)
    for v in times.values():
        v.clear()
    order = random.Random(0)
    for _ in range(REPEATS):
        for fn in order.sample(rounds, len(rounds)):
            fn()
    med = {m: statistics.median(v) for m, v in times.items()}
    for m, v in times.items():
        print(f"{m:>10}: median {med[m] * 1e3:8.2f} ms  min {min(v) * 1e3:8.2f} ms")
    full = recorders["full"]
    print(f"{len(full.records)} records, {sum(full.compiled_calls.values())} compiled calls, "
          f"compiled ran compiled: {full.ran_compiled()}; last full run: {full.copies.taken} copies taken, "
          f"{full.copies.reused} reused")
    print("ratio of medians vs off: " + ", ".join(f"{m} {med[m] / med['off']:.2f}x" for m in times if m != "off")
          + "  (target ≤ 1.3x for the fused path under recording)")
    paired = {m: statistics.median(t / o for t, o in zip(times[m], times["off"])) for m in times if m != "off"}
    print("median of per-round ratios: " + ", ".join(f"{m} {r:.2f}x" for m, r in paired.items()))
    print("ratio of minimums (least disturbed runs): "
          + ", ".join(f"{m} {min(times[m]) / min(times['off']):.2f}x" for m in times if m != "off"))
    rt.close()


def full_trace() -> None:
    """One `annotate trace` in a fresh process (warm Inductor disk cache): its own breakdown."""
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "annotate", "--root", str(ROOT), "trace", "--preset", PRESET,
               "--layers", str(LAYERS), "--tokens", str(TOKENS), "--out", str(Path(tmp) / "t"), "--quiet"]
        start = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
        wall = time.perf_counter() - start
    if proc.returncode:
        print(proc.stderr)
        return
    tail = proc.stdout[proc.stdout.index("time breakdown:"):]
    print(f"annotate trace --preset {PRESET} --layers {LAYERS} --tokens {TOKENS}: {wall:.2f} s wall (process start included)")
    print(tail)


if __name__ == "__main__":
    # `--threads N`: torch intra-op threads for the overhead part (on a loaded 2-core machine,
    # 1 thread keeps OpenMP from spinning against other processes and the medians steady)
    if "--threads" in sys.argv:
        import torch

        torch.set_num_threads(int(sys.argv[sys.argv.index("--threads") + 1]))
    overhead()
    if "--no-full" not in sys.argv:
        full_trace()
