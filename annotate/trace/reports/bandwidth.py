"""Time the fused `RMSNorm.add_rms_forward` against its eager body and a copy of the same bytes.

The fused kernel reads x, residual and γ and writes the normalised x and the new residual:
(4·T·H + H) elements. A plain device copy moving the same number of bytes (half read, half
written) is the practical bandwidth ceiling; the fused kernel's achieved bandwidth is reported as a
fraction of it.

Method (written into the JSON as "method"): each function is first called `warmup` times (the
first fused call compiles); then, `repeats` times, ONE timer pair brackets a loop of `calls` calls
and the time per call is the loop's time divided by `calls`, so launch gaps between calls are
amortised instead of being counted once per call; the figure reported is the median over the
repeats (min and max are kept beside it). CUDA is timed with CUDA events recorded on the stream
around the loop (then synchronised), CPU with time.perf_counter around the same loop, so the CPU
rehearsal runs the same code path. The copy reference is measured the same way on the same bytes.

    python -m annotate.trace.reports.bandwidth --device cuda --out traces/cuda/bandwidth.json
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any, Callable

import torch

from annotate.trace.format import provenance
from annotate.trace.model import runtime
from annotate.trace.record.recorder import unwrap_compiled

LoopTimer = Callable[[Callable[[], Any], int], float]


def loop_timer(device: torch.device) -> LoopTimer:
    """A function running `fn` `calls` times back to back under one timer pair; seconds per call."""
    def cuda(fn: Callable[[], Any], calls: int) -> float:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3 / calls

    def cpu(fn: Callable[[], Any], calls: int) -> float:
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        return (time.perf_counter() - t0) / calls

    return cuda if device.type == "cuda" else cpu


def time_per_call(timer: LoopTimer, fn: Callable[[], Any], *, warmup: int, calls: int, repeats: int) -> dict[str, Any]:
    """Warm `fn` up, then time `repeats` loops of `calls` calls: median, min, max and every repeat (s/call)."""
    timer(fn, warmup)
    per_call = [timer(fn, calls) for _ in range(repeats)]
    return {"median": statistics.median(per_call), "min": min(per_call), "max": max(per_call), "repeats": per_call}


def method(device: torch.device, warmup: int, calls: int, repeats: int) -> dict[str, Any]:
    """How the numbers were measured, written beside them."""
    clock = ("CUDA events recorded around the loop, then synchronised" if device.type == "cuda"
             else "time.perf_counter around the loop")
    return {"timer": clock, "warmup_calls": warmup, "calls_per_repeat": calls, "repeats": repeats,
            "statistic": "median over repeats of (loop time / calls); min and max beside it",
            "bytes": "fused and eager: read x, residual, weight; write x, residual = (4*T*H + H) elements; "
                     "copy: dst.copy_(src) of bytes_moved/2 bytes (read + write = bytes_moved)",
            "bandwidth": "bytes_moved / median seconds per call"}


def measure(root: Path, device: str = "cuda", dtype: str = "bfloat16", tokens: int = 32768, hidden: int = 1024,
            repeats: int = 20, calls: int = 100, warmup: int = 10) -> dict[str, Any]:
    """Median time per call and achieved bandwidth of fused, eager and copy; fractions of copy bandwidth."""
    if min(repeats, calls, warmup) < 1:
        raise ValueError(f"repeats, calls and warmup must be at least 1 (got {repeats}, {calls}, {warmup})")
    dev = runtime.check_device(device)
    dt = runtime.check_dtype(dev, dtype)
    if dt == torch.float32:
        raise ValueError("float32 add_rms_forward updates its inputs in place (aliasing); time bfloat16 or float16")
    mods = runtime.import_vendored(root, dev.type)
    RMSNorm = mods["layernorm"].RMSNorm
    norm = RMSNorm(hidden).to(dev, dt)
    g = torch.Generator(device=dev).manual_seed(0)
    x = torch.randn(tokens, hidden, device=dev, dtype=dt, generator=g)
    res = torch.randn(tokens, hidden, device=dev, dtype=dt, generator=g)
    eager_body = unwrap_compiled(RMSNorm, "add_rms_forward")
    moved = (4 * tokens * hidden + hidden) * x.element_size()
    src = torch.empty(moved // 2, dtype=torch.uint8, device=dev)
    dst = torch.empty_like(src)
    fns = {"fused": lambda: norm.add_rms_forward(x, res), "eager": lambda: eager_body(norm, x, res),
           "copy": lambda: dst.copy_(src)}
    timer = loop_timer(dev)
    with torch.inference_mode():
        timings = {k: time_per_call(timer, fn, warmup=warmup, calls=calls, repeats=repeats) for k, fn in fns.items()}
        fused_out, eager_out = fns["fused"](), fns["eager"]()
    med = {k: v["median"] for k, v in timings.items()}
    bw = {k: moved / v for k, v in med.items()}
    from annotate.trace.model.numerics import distance

    return {
        "what": "RMSNorm.add_rms_forward: fused (torch.compile) vs eager body vs device copy of the same bytes",
        "device": dev.type, "device_name": provenance.device_name(dev), "dtype": dtype,
        "tokens": tokens, "hidden": hidden, "bytes_moved": moved,
        "method": method(dev, warmup, calls, repeats),
        "seconds_per_call": timings, "median_s": med,
        "bandwidth_GBps": {k: v / 1e9 for k, v in bw.items()},
        "fraction_of_copy": {"fused": bw["fused"] / bw["copy"], "eager": bw["eager"] / bw["copy"]},
        "fused_speedup_vs_eager": med["eager"] / med["fused"],
        "fused_vs_eager": {n: distance(a, b).__dict__ for n, a, b in
                           (("x", fused_out[0], eager_out[0]), ("residual", fused_out[1], eager_out[1]))},
        "versions": provenance.versions(),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m annotate.trace.reports.bandwidth", description=__doc__.splitlines()[0])
    p.add_argument("--root", type=Path, default=Path("."))
    p.add_argument("--device", default="cuda", choices=("cpu", "cuda"))
    p.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float16"))
    p.add_argument("--tokens", type=int, default=32768)
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--repeats", type=int, default=20, help="timed loops; the median is reported")
    p.add_argument("--calls", type=int, default=100, help="calls inside one timed loop")
    p.add_argument("--warmup", type=int, default=10, help="untimed calls first (the first fused call compiles)")
    p.add_argument("--out", type=Path, help="write the result as JSON here (stdout otherwise)")
    args = p.parse_args(argv)
    result = measure(args.root, args.device, args.dtype, args.tokens, args.hidden, args.repeats, args.calls, args.warmup)
    text = json.dumps(result, indent=1)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        tmp = args.out.with_name(args.out.name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(args.out)
    f = result["fraction_of_copy"]
    print(f"add_rms_forward {result['tokens']}x{result['hidden']} {result['dtype']} on {result['device_name']}: "
          f"fused {result['median_s']['fused'] * 1e6:.1f} us ({f['fused']:.0%} of copy bandwidth), "
          f"eager {result['median_s']['eager'] * 1e6:.1f} us ({f['eager']:.0%}), "
          f"copy {result['bandwidth_GBps']['copy']:.0f} GB/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
