"""Time the fused `RMSNorm.add_rms_forward` against its eager body and a device copy of the same bytes.

The fused kernel reads x, residual and γ and writes the normalised x and the new residual:
(4·T·H + H) elements. A plain device copy moving the same number of bytes (half read, half
written) is the practical bandwidth ceiling; the fused kernel's achieved bandwidth is reported as a
fraction of it. CUDA is timed with events, CPU with perf_counter (the module runs on both, so the
code path the GPU check uses is exercised here too).

    python -m annotate.trace.bandwidth --device cuda --out traces/cuda/bandwidth.json
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any, Callable

import torch

from annotate.trace import provenance, runtime
from annotate.trace.recorder import unwrap_compiled


def _timer(device: torch.device) -> Callable[[Callable[[], Any], int], list[float]]:
    """A function timing `fn` `iters` times on `device`, returning seconds per call."""
    def cuda(fn: Callable[[], Any], iters: int) -> list[float]:
        out = []
        for _ in range(iters):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            out.append(start.elapsed_time(end) / 1e3)
        return out

    def cpu(fn: Callable[[], Any], iters: int) -> list[float]:
        out = []
        for _ in range(iters):
            t0 = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t0)
        return out

    return cuda if device.type == "cuda" else cpu


def measure(root: Path, device: str = "cuda", dtype: str = "bfloat16", tokens: int = 32768, hidden: int = 1024,
            iters: int = 50) -> dict[str, Any]:
    """Median time and achieved bandwidth of fused, eager and copy; fractions of copy bandwidth."""
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
    timer = _timer(dev)
    with torch.inference_mode():
        for fn in fns.values():   # warm-up; the first fused call compiles
            timer(fn, 3)
        med = {k: statistics.median(timer(fn, iters)) for k, fn in fns.items()}
        fused_out, eager_out = fns["fused"](), fns["eager"]()
    bw = {k: moved / v for k, v in med.items()}
    from annotate.trace.numerics import distance

    return {
        "what": "RMSNorm.add_rms_forward: fused (torch.compile) vs eager body vs device copy of the same bytes",
        "device": dev.type, "device_name": provenance.device_name(dev), "dtype": dtype,
        "tokens": tokens, "hidden": hidden, "bytes_moved": moved, "iters": iters,
        "median_s": med, "bandwidth_GBps": {k: v / 1e9 for k, v in bw.items()},
        "fraction_of_copy": {"fused": bw["fused"] / bw["copy"], "eager": bw["eager"] / bw["copy"]},
        "fused_speedup_vs_eager": med["eager"] / med["fused"],
        "fused_vs_eager": {n: distance(a, b).__dict__ for n, a, b in
                           (("x", fused_out[0], eager_out[0]), ("residual", fused_out[1], eager_out[1]))},
        "versions": provenance.versions(),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m annotate.trace.bandwidth", description=__doc__.splitlines()[0])
    p.add_argument("--root", type=Path, default=Path("."))
    p.add_argument("--device", default="cuda", choices=("cpu", "cuda"))
    p.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float16"))
    p.add_argument("--tokens", type=int, default=32768)
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--iters", type=int, default=50)
    p.add_argument("--out", type=Path, help="write the result as JSON here (stdout otherwise)")
    args = p.parse_args(argv)
    result = measure(args.root, args.device, args.dtype, args.tokens, args.hidden, args.iters)
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
