"""Benchmark: the recorder's cost against a plain forward, and `identify` from 4 to 28 layers.

One process, 1 torch thread (`--threads N` to change), CPU, bfloat16, the same compiled model per shape:
  off       the plain prefill (compiled functions, no tracing)
  lines     the line recorder alone (copies of assigned and live variables; compiled calls pass through)
  replays   lines + copies of every compiled call's inputs/outputs + the eager replays of the
            compiled bodies, which the recorder runs right after the forward (the whole recording)
The modes are interleaved round by round in a shuffled order, so background load on a shared
machine hits them alike; each ratio is the median of per-round ratios (each recorded run against
the plain run of its own round). `ratio` counts until the records are in hand (replays and the
bookkeeping after the forward included, which the recorder does on first access to its records),
`hot_ratio` the forward and the replays (what runs while the program's tensors are live),
`cpu_ratio` the whole in this process's CPU time (what other processes on a shared machine take is
left out), `forward_ratio` the forward under the recorder alone; `per_line_us` is the recorder's
extra time (to records in hand) per record it made. `replays alone, untraced`: the compiled bodies'
eager replays on their saved inputs with nothing recording — the floor of `lines + replays` that no
recorder can remove, as a ratio to the plain forward. `lines, least Python (floor)`: the least
work any per-line recorder in Python does (`line_floor.py`: per finished statement one read of the
frame's locals, a snapshot of them, a copy of each tensor object not yet copied; no entries,
returns, compiled-call bookkeeping or write detection, so its records are not right), with each
backend, in the same rounds: the gap between it and `lines` is what leaner bookkeeping could
still remove, its own ratio what any Python recorder pays here. Split in the same rounds:
`lines, least Python, no copies` (the same callbacks keeping the tensors themselves),
`line events alone (C callback)` (sys.monitoring's events delivered to a builtin: what the
interpreter's event machinery costs with no Python per event) and the derived `copies alone (floor −
no copies)` (per round: what the floor's copies cost inside the forward). On sys.monitoring, the same
floor written in C (`line_floor_c.c`, compiled for this interpreter when the bench starts; left out,
with one line saying why, where it cannot be): `lines, least work in C (floor)`, `… no copies` and the
derived `copies alone, in C`: what a recorder in C, with no Python run per event, would still pay;
and the lean C floor, `lines, least work in C, watched names only` (and `…, no copies`): the watched
names read from their frame slots, no snapshot of the locals (its distance to the C floor is what the
snapshots cost).
Every line-event backend the interpreter has runs in the same rounds (3.11: `sys.settrace`; 3.12+:
`sys.monitoring` and `sys.settrace`, the like-for-like comparison; `--line-events NAME` for one);
each interpreter writes its own results file (`make bench` runs the 3.12 venv of `make py312` too,
overhead rows only).
Shapes: tiny (4 layers, 12 tokens: a forward as fast as a real model's on a GPU) and qwen3-0.6b cut
to 4 layers, 32 tokens.

`identify`: the tiny shape at 4 and at 28 layers (a generated checkpoint of that depth), recorded
once each; then the identification step of `annotate trace` (summaries and identities of every
recorded copy, `assemble.records_payload`) is timed at both depths as `annotate trace` runs it, with
the prefilter forced on, and with every candidate compared in full (:data:`PATHS`), interleaved in
shuffled rounds (median of per-round ratios), in this process's CPU time: each step takes seconds,
long enough for other processes on a shared machine to take the core in between. Each timed step
starts right after a full garbage collection (outside the timing), so that it pays for the
collections its own allocations trigger, not for a full pass the steps before it made due: a full
pass scans every object of this process (torch, transformers, the compiled models: ~0.3 s, longer
than a whole 4-layer step), and without it such passes land mostly in the 28-layer steps, which
allocate more, adding ~0.3 s to most of them and nothing to most 4-layer ones.
The issue's target: 28 L / 4 L ≤ 8 (linear in layers: 7×).

Options: --threads N, --rounds N, --no-overhead, --no-identify, --line-events NAME, --full-trace (then one whole
`annotate trace` in a fresh process and its time breakdown), --device cpu|cuda (the overhead rows on that
device: `scripts/gpu-check.sh` runs them on the lent GPU; each timing waits for the device's queued
work), --shapes tiny,qwen3-0.6b (some of the shapes), --out PATH (instead of bench/results/…; written
after each shape, so a run cut short keeps what it measured). Writes bench/results/trace.json (trace-py312.json
on 3.12): {"bench": "trace", ..., "rows": [flat records]}, which docs/guide/performance.md's tables are generated
from. Benchmarks print and write; they never assert timing.
"""
from __future__ import annotations

import functools
import gc
import json
import random
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from annotate.trace import assemble  # noqa: E402
from annotate.trace.record import native  # noqa: E402
from annotate.trace.model import runtime  # noqa: E402
from annotate.trace.model.options import PRESETS, TraceOptions  # noqa: E402
from annotate.trace.model.options import default_backend  # noqa: E402
from annotate.trace.record.recorder import Recorder  # noqa: E402
from annotate.trace.identify.reference import Identifier, PeerRun, run_reference  # noqa: E402

import line_floor  # noqa: E402  (bench/, beside this script)

PYTHON = ".".join(map(str, sys.version_info[:2]))
#: which recorder this process runs: the mypyc build of its per-line modules, or their Python source
#: (`annotate/trace/record/native.py`; `ANNOTATE_NATIVE=0` asks for the latter)
RECORDER = "compiled" if native.STATE.active else "python"
#: one results file per interpreter and recorder: 3.11 (sys.settrace; and the identify rows), 3.12
#: (sys.monitoring); `-python` when the recorder ran as Python
RESULTS = ROOT / "bench" / "results" / (("trace" if PYTHON == "3.11" else f"trace-py{PYTHON.replace('.', '')}")
                                        + ("" if RECORDER == "compiled" else "-python") + ".json")
ROUNDS = 30
#: (preset, layers, tokens) of the overhead rows
SHAPES = (("tiny", 4, 12), ("qwen3-0.6b", 4, 32))
IDENTIFY_LAYERS = (4, 28)
IDENTIFY_ROUNDS = 5
#: identification paths: as `annotate trace` runs it (the prefilter on large stacks only), the
#: prefilter on whatever the size, every candidate compared in full
PATHS = ("default", "prefilter on", "no prefilter")
#: the issue's targets per (preset, mode): a ratio to the plain forward (None: "no worse than before")
TARGETS = {("tiny", "lines"): 1.25, ("tiny", "lines + replays"): 1.6, ("identify", "28L / 4L"): 8.0}


def _settled(rt: runtime.Runtime) -> None:
    """Wait for the device's queued work (CUDA runs asynchronously; the CPU is always done)."""
    if rt.device.type == "cuda":
        torch.cuda.synchronize(rt.device)


def _recorded(rec: Recorder, rt: runtime.Runtime) -> tuple[float, float, float, float, int]:
    """One recorded prefill: seconds of the forward under the recorder, of the forward and the
    replays (the hot path: what runs while the program's tensors are live), until the records are
    in hand (the bookkeeping after the forward included), the latter in this process's CPU time,
    and how many records it made."""
    rec.install()
    rec.reset()
    c0, t0 = time.process_time(), time.perf_counter()
    with rec.recording():
        runtime.run_prefill(rt)   # (which waits for the device)
        t1 = time.perf_counter()
    _settled(rt)   # the replays' device work
    t2 = time.perf_counter()
    n = len(rec.records)   # built on first access
    _settled(rt)
    t3, c3 = time.perf_counter(), time.process_time()
    rec.uninstall()
    return t1 - t0, t2 - t0, t3 - t0, c3 - c0, n


def replay_floor(rec: Recorder, rt: runtime.Runtime, rounds: int) -> float:
    """Median seconds of the compiled bodies' eager replays with nothing recording: the part of
    `lines + replays` no recorder can remove (the eager ops themselves)."""
    rec.install()
    rec.reset()
    with rec.recording():
        runtime.run_prefill(rt)
    rec.uninstall()
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for p in rec.kept_replays:
            inputs = [a.clone() if isinstance(a, torch.Tensor) else a for a in p.inputs]
            with torch.inference_mode(p.inference_mode):
                p.orig(p.module, *inputs)
        _settled(rt)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


MODES = ("lines", "lines + replays")
#: a derived row: the floor's copies alone (floor − no copies, per round), as 1 + their share of the plain forward
COPIES_MODE = "copies alone (floor − no copies)"
C_COPIES_MODE = "copies alone, in C (C floor − C no copies)"
@functools.cache
def _c_floor() -> Any:
    """The C floor (`line_floor.build_c_floor`), built once per process in a temporary folder; or
    None, the reason said once (and its rows left out)."""
    with tempfile.TemporaryDirectory(prefix="annotate-c-floor-") as work:
        built = line_floor.build_c_floor(Path(work))   # loaded: the folder can go
    if isinstance(built, str):
        print(f"[bench] {built}: its rows are left out", flush=True)
        return None
    return built


def overhead(preset: str, layers: int, tokens: int, rounds: int, backends: list[str],
             device: str = "cpu") -> list[dict[str, Any]]:
    """Rows for one shape: lines and lines + replays, with each line-event backend, against the
    plain forward, all interleaved in the same rounds."""
    rt = runtime.build_runtime(TraceOptions(preset=preset, layers=layers, tokens=tokens, root=ROOT, device=device))
    # the floor and its parts (`line_floor.py`); the events alone and the C floor only where callbacks
    # can be builtins (sys.monitoring), the C floor only where it built (`_c_floor`)
    floors = [(v, b) for b in backends for v in line_floor.VARIANTS
              if v not in line_floor.MONITORING_ONLY or (b == "monitoring" and (v == "events alone" or _c_floor()))]
    try:
        mods = runtime.import_vendored(ROOT, device)
        runtime.run_prefill(rt)   # compile
        recorders = {f"{m}|{b}": Recorder(rt.model, mods, runtime.vendor_root(ROOT), replay=m != "lines", backend=b,
                                           keep_replays=True)
                     for b in backends for m in MODES}
        times: dict[str, list[float]] = {"off": [], "off cpu": [], **{m: [] for m in recorders},
                                         **{f"{v}|{b}": [] for v, b in floors},
                                         **{f"{m} {k}": [] for m in recorders for k in ("fwd", "hot", "cpu")}}
        counts: dict[str, int] = {}

        def plain() -> None:
            c0, t0 = time.process_time(), time.perf_counter()
            runtime.run_prefill(rt)
            times["off"].append(time.perf_counter() - t0)
            times["off cpu"].append(time.process_time() - c0)

        infos = list(recorders[f"lines|{backends[0]}"].traced.values())

        def floor(variant: str, backend: str) -> Callable[[], None]:
            def run() -> None:
                t0 = time.perf_counter()
                c_floor = _c_floor() if variant in line_floor.C_VARIANTS else None
                counts[f"{variant}|{backend}"] = line_floor.record(infos, lambda: runtime.run_prefill(rt), backend, variant,
                                                                   c_floor)
                times[f"{variant}|{backend}"].append(time.perf_counter() - t0)
            return run

        def mode(name: str) -> Callable[[], None]:
            def run() -> None:
                forward, hot, total, cpu, counts[name] = _recorded(recorders[name], rt)
                times[f"{name} fwd"].append(forward)
                times[f"{name} hot"].append(hot)
                times[name].append(total)
                times[f"{name} cpu"].append(cpu)
            return run

        steps = [plain, *(mode(m) for m in recorders), *(floor(v, b) for v, b in floors)]
        for step in steps:
            step()   # warm-up: wrappers installed once, so any guard change is compiled here
        for v in times.values():
            v.clear()
        order = random.Random(0)
        for _ in range(rounds):
            for step in order.sample(steps, len(steps)):
                step()
        floor = replay_floor(recorders[f"lines + replays|{backends[0]}"], rt, rounds)
    finally:
        rt.close()
    off = statistics.median(times["off"])
    rows = []
    head = {"bench": "trace", "shape": f"{preset} {layers}L {tokens}T", "preset": preset, "device": device}

    def ratio(m: str, off: str = "off") -> float:
        return statistics.median(t / o for t, o in zip(times[m], times[off]))

    for m in recorders:
        extra = statistics.median(t - o for t, o in zip(times[m], times["off"]))
        mode_name, backend = m.split("|")
        rows.append({**head, "mode": mode_name, "python": PYTHON, "line_events": backend, "recorder": RECORDER,
                     "ratio": round(ratio(m), 3), "hot_ratio": round(ratio(f"{m} hot"), 3),
                     "forward_ratio": round(ratio(f"{m} fwd"), 3),
                     "cpu_ratio": round(ratio(f"{m} cpu", "off cpu"), 3),
                     "forward_ms": round(off * 1e3, 3),
                     "extra_ms": round(extra * 1e3, 3), "records": counts[m],
                     "per_line_us": round(extra / max(counts[m], 1) * 1e6, 2),
                     "target": TARGETS.get((preset, mode_name)), "rounds": rounds})
    for v, b in floors:
        extra = statistics.median(t - o for t, o in zip(times[f"{v}|{b}"], times["off"]))
        n = counts[f"{v}|{b}"]
        rows.append({**head, "mode": line_floor.VARIANTS[v], "python": PYTHON, "line_events": b, "recorder": None,
                     "ratio": round(ratio(f"{v}|{b}"), 3), "forward_ms": round(off * 1e3, 3),
                     "extra_ms": round(extra * 1e3, 3), "records": n or None,
                     "per_line_us": round(extra / n * 1e6, 2) if n else None, "rounds": rounds})
    # the copies alone: floor − no copies, per round, as a ratio to that round's plain forward
    for (full, bare), mode_name, b in [*((("floor", "no copies"), COPIES_MODE, b) for b in backends),
                                       *((("C floor", "C no copies"), C_COPIES_MODE, b) for b in backends
                                         if ("C floor", b) in floors)]:
        copies = statistics.median((f - c) / o for f, c, o in zip(times[f"{full}|{b}"], times[f"{bare}|{b}"], times["off"]))
        rows.append({**head, "mode": mode_name, "python": PYTHON, "line_events": b, "recorder": None, "ratio": round(1 + copies, 3),
                     "forward_ms": round(off * 1e3, 3), "extra_ms": round(copies * off * 1e3, 3), "rounds": rounds})
    rows.append({**head, "mode": "replays alone, untraced", "python": PYTHON, "line_events": None, "recorder": None,
                 "ratio": round(floor / off, 3), "forward_ms": round(off * 1e3, 3), "extra_ms": round(floor * 1e3, 3),
                 "rounds": rounds})
    return rows


def _deep_checkpoint(folder: Path, layers: int) -> Path:
    """The tiny preset's shape with `layers` decoder layers, as a generated checkpoint folder."""
    from safetensors.torch import save_file

    cfg = runtime.preset_config(replace(PRESETS["tiny"], num_hidden_layers=layers), layers, "bfloat16")
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(cfg), encoding="utf-8")
    save_file(runtime.random_state_dict(cfg, 0, torch.bfloat16), str(folder / "model.safetensors"),
              metadata={"format": "pt"})
    return folder


def _recorded_deep(layers: int, tmp: Path) -> tuple[Recorder, PeerRun]:
    """The tiny shape at `layers` layers, recorded once, and its peer's values."""
    model = _deep_checkpoint(tmp / f"tiny-{layers}L", layers)
    rt = runtime.build_runtime(TraceOptions(model=model, layers=layers, tokens=12, root=ROOT))
    try:
        mods = runtime.import_vendored(ROOT, "cpu")
        runtime.run_prefill(rt)
        rec = Recorder(rt.model, mods, runtime.vendor_root(ROOT))
        with rec.recording():
            runtime.run_prefill(rt)
        rec.uninstall()
        ref = run_reference(rt.checkpoint, layers, rt.dtype, rt.device, rt.input_ids)
    finally:
        rt.close()
    return rec, ref


def identify_rows(rounds: int) -> list[dict[str, Any]]:
    """Identification (`assemble.records_payload`: summaries and identities of every recorded copy)
    at 4 and 28 layers, with the prefilter and with every candidate compared in full, interleaved
    round by round in a shuffled order; the growth is the median of per-round ratios."""
    with tempfile.TemporaryDirectory() as tmp:
        runs = {n: _recorded_deep(n, Path(tmp)) for n in IDENTIFY_LAYERS}
    times: dict[tuple[int, str], list[float]] = {}
    compared: dict[tuple[int, str], int] = {}

    def step(layers: int, path: str) -> Callable[[], None]:
        def run() -> None:
            rec, ref = runs[layers]
            ident = Identifier(ref, exhaustive=path == "no prefilter", prefilter_above=0 if path == "prefilter on" else None)
            gc.collect()   # every step starts from the same collector state (see the module's docstring)
            t0 = time.process_time()
            assemble.records_payload(rec, ident, save=False)
            times.setdefault((layers, path), []).append(time.process_time() - t0)
            compared[(layers, path)] = ident.compared
        return run

    steps = [step(n, p) for n in IDENTIFY_LAYERS for p in PATHS]
    order = random.Random(1)
    for _ in range(rounds):
        for s in order.sample(steps, len(steps)):
            s()
    lo, hi = IDENTIFY_LAYERS
    rows: list[dict[str, Any]] = []
    for path in PATHS:
        for n in IDENTIFY_LAYERS:
            rows.append({"bench": "trace", "shape": f"tiny {n}L 12T", "preset": "identify", "mode": f"identify ({path})",
                         "cpu_ms": round(statistics.median(times[(n, path)]) * 1e3, 2), "records": len(runs[n][0].records),
                         "candidates": len(runs[n][1].values), "compared": compared[(n, path)]})
        growth = statistics.median(h / lo_ for h, lo_ in zip(times[(hi, path)], times[(lo, path)]))
        rows.append({"bench": "trace", "shape": f"tiny {hi}L / {lo}L", "preset": "identify",
                     "mode": f"{hi}L / {lo}L" + ("" if path == "default" else f" ({path})"),
                     "ratio": round(growth, 2), "target": TARGETS[("identify", f"{hi}L / {lo}L")] if path == "default" else None,
                     "rounds": rounds})
    return rows


def full_trace() -> None:
    """One `annotate trace` (qwen3-0.6b, 4 layers, 32 tokens) in a fresh process (warm Inductor disk
    cache): its own time breakdown, printed (`--full-trace`)."""
    import subprocess

    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "annotate", "--root", str(ROOT), "trace", "--preset", "qwen3-0.6b",
               "--layers", "4", "--tokens", "32", "--out", str(Path(tmp) / "t"), "--quiet"]
        start = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
        wall = time.perf_counter() - start
    if proc.returncode:
        print(proc.stderr)
        return
    print(f"annotate trace --preset qwen3-0.6b --layers 4 --tokens 32: {wall:.2f} s wall (process start included)")
    print(proc.stdout[proc.stdout.index("time breakdown:"):])


def main(argv: list[str]) -> None:
    if "--help" in argv or "-h" in argv:   # say what it does; run nothing, write nothing
        print(__doc__)
        return
    threads = int(argv[argv.index("--threads") + 1]) if "--threads" in argv else 1
    rounds = int(argv[argv.index("--rounds") + 1]) if "--rounds" in argv else ROUNDS
    # 1 thread: on a loaded machine OpenMP would spin against other processes; per-line costs are
    # Python's, and a GPU forward is as short as the tiny one on one core
    torch.set_num_threads(threads)
    print(f"recorder: {native.STATE.status}")
    # every backend this interpreter has, in the same rounds (3.12+: sys.monitoring beside sys.settrace)
    backends = [argv[argv.index("--line-events") + 1]] if "--line-events" in argv else \
        sorted({default_backend(), "settrace"}, key=lambda b: b != default_backend())
    device = argv[argv.index("--device") + 1] if "--device" in argv else "cpu"
    out = Path(argv[argv.index("--out") + 1]).resolve() if "--out" in argv else RESULTS
    wanted = argv[argv.index("--shapes") + 1].split(",") if "--shapes" in argv else [p for p, _, _ in SHAPES]
    unknown = sorted(set(wanted) - {p for p, _, _ in SHAPES})
    if unknown:
        raise SystemExit(f"bench_trace: --shapes {','.join(unknown)}: expected some of {','.join(p for p, _, _ in SHAPES)}")
    rows: list[dict[str, Any]] = []

    def write() -> None:   # after each shape: a run cut short (a device's time limit) keeps what it measured
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"bench": "trace", "threads": threads, "rounds": rounds, "recorder": native.STATE.status,
                                   "python": sys.version.split()[0], "torch": torch.__version__, "device": device,
                                   "rows": rows}, indent=1) + "\n", encoding="utf-8")

    for preset, layers, tokens in () if "--no-overhead" in argv else [sh for sh in SHAPES if sh[0] in wanted]:
        shape_rows = overhead(preset, layers, tokens, rounds, backends, device)
        rows += shape_rows
        write()
        for r in shape_rows:
            if r["mode"] in MODES:
                print(f"{r['shape']:>22} {r['mode']:<16} {r['ratio']:.2f}x  (hot path {r['hot_ratio']:.2f}x; "
                      f"CPU time {r['cpu_ratio']:.2f}x; under the forward {r['forward_ratio']:.2f}x; "
                      f"plain forward {r['forward_ms']:.1f} ms, "
                      f"+{r['extra_ms']:.1f} ms, {r['per_line_us']:.1f} µs per record over {r['records']} records; "
                      f"{r['line_events']})")
            else:
                print(f"{r['shape']:>22} {r['mode']}: {r['ratio']:.2f}x of a plain forward"
                      + (f" ({r['line_events']})" if r["line_events"] else ""))
    if "--no-identify" not in argv:
        rows += identify_rows(IDENTIFY_ROUNDS)
        for r in rows:
            if r["preset"] == "identify":
                print(f"{r['shape']:>22} {r['mode']:<24} " + (f"{r['cpu_ms']:.1f} ms CPU, {r['compared']} full comparisons"
                                                               if "cpu_ms" in r else f"{r['ratio']:.2f}x"))
    write()
    print(f"wrote {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}")
    if "--full-trace" in argv:
        full_trace()


if __name__ == "__main__":
    main(sys.argv[1:])
