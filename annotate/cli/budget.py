"""`annotate budget --model DIR`: the memory and disk a trace of a local checkpoint needs, from its config.

The numbers come from annotate/trace/budget.py; with ``--memory`` (the GPU's size, e.g. 12 for an
RTX 4070 Ti) it refuses, like `annotate trace --device cuda` does before loading weights.
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from annotate.errors import UserError
from annotate.trace.options import DTYPE_NAMES, TRACE_DEFAULTS

BUDGET_HELP = "memory and disk a trace of a local Qwen3 checkpoint needs, computed from its config.json"


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("budget", help=BUDGET_HELP, description=BUDGET_HELP)
    p.add_argument("--model", type=Path, required=True, help="a local Qwen3 checkpoint folder (config.json + *.safetensors)")
    p.add_argument("--layers", type=int, help="decoder layers to build (default: all)")
    p.add_argument("--tokens", type=int, default=32, help="prompt length (default 32)")
    p.add_argument("--dtype", default=TRACE_DEFAULTS.dtype, choices=DTYPE_NAMES)
    p.add_argument("--memory", type=float, help="the device's memory in GiB: refuse when the trace will not fit")
    p.set_defaults(func=run_budget)


def run_budget(args: argparse.Namespace) -> int:
    from annotate.trace import budget, runtime

    config = runtime.read_model_dir(args.model)
    layers = runtime.resolve_layers(args.layers, int(config["num_hidden_layers"]), str(args.model))
    if args.tokens < 1:
        raise UserError(f"--tokens {args.tokens}: need at least 1 token")
    disk = sum(p.stat().st_size for p in args.model.glob("*.safetensors"))
    units = budget.measured_units(Path(args.root))
    got = budget.estimate(config, layers, args.tokens, args.dtype, units, disk)
    print(render_budget(got, layers, args.tokens, args.dtype, units))
    if args.memory is not None:
        budget.check_fits(got, int(args.memory * budget.GIB), f"a {args.memory:g} GiB device", f"--model {args.model}",
                          args.dtype)
        print(f"fits in {args.memory:g} GiB")
    return 0


def render_budget(b: Any, layers: int, tokens: int, dtype: str, units: float | None) -> str:
    from annotate.trace.budget import gib

    recorded = (f"{gib(b.recorded)}  ({units:.1f} hidden-sized vectors per token and layer, measured from the "
                "default trace)" if b.recorded is not None and units is not None else
                "not measured (record the default trace first: annotate trace)")
    return "\n".join([
        f"trace of {layers} layers × {tokens} tokens in {dtype}",
        f"  weights (one copy)          {gib(b.weights)}",
        f"  activations (peak, 1 layer) {gib(b.activations)}",
        f"  recorded copies             {recorded}",
        f"  device memory               {gib(b.device_memory)}  (weights × 2: nano-vllm and the HF reference)",
        f"  disk: checkpoint            {gib(b.checkpoint_disk)}",
        f"  disk: trace --full-tensors  {gib(b.trace_disk) if b.trace_disk is not None else 'not measured'}",
    ])
