"""`annotate budget --model DIR`: the memory and disk a trace of a local checkpoint needs, from its config.

The numbers come from annotate/trace/model/budget.py; with ``--memory`` (the GPU's size, e.g. 12 for an
RTX 4070 Ti) it refuses, like `annotate trace --device cuda` does before loading weights. Every option
is checked before the config is used: a size the budget cannot mean (NaN, infinite, beyond any GPU,
zero or negative, more tokens than the model has positions) is refused in one line.
"""
from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

from annotate.errors import UserError
from annotate.trace.model.options import DTYPE_NAMES, TRACE_DEFAULTS

BUDGET_HELP = "memory and disk a trace of a local Qwen3 checkpoint needs, computed from its config.json"
#: the largest --memory taken, in GiB (no device has a pebibyte; a larger number is a typo)
MAX_MEMORY_GIB = 2**20


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("budget", help=BUDGET_HELP, description=BUDGET_HELP)
    p.add_argument("--model", type=Path, required=True, help="a local Qwen3 checkpoint folder (config.json + *.safetensors)")
    p.add_argument("--layers", type=int, help="decoder layers to build (default: all)")
    p.add_argument("--tokens", type=int, default=32, help="prompt length (default 32)")
    p.add_argument("--dtype", default=TRACE_DEFAULTS.dtype, choices=DTYPE_NAMES)
    p.add_argument("--memory", type=float, help="the device's memory in GiB: refuse when the trace will not fit")
    p.set_defaults(func=run_budget)


def check_memory_option(memory: float | None) -> None:
    """--memory must be a finite size in GiB above 0 and at most :data:`MAX_MEMORY_GIB`."""
    if memory is not None and not (math.isfinite(memory) and 0 < memory <= MAX_MEMORY_GIB):
        raise UserError(f"--memory {memory:g}: expected the device's memory in GiB, a number above 0 and at most "
                        f"{MAX_MEMORY_GIB}; pass e.g. --memory 12 for a 12 GiB GPU")


def check_tokens_option(tokens: int, config: dict[str, Any]) -> None:
    """--tokens must be 1..max_position_embeddings, as `annotate trace` requires."""
    limit = int(config["max_position_embeddings"])
    if not 1 <= tokens <= limit:
        raise UserError(f"--tokens {tokens}: expected 1..{limit} (the model's max_position_embeddings); "
                        f"pass --tokens {min(max(tokens, 1), limit)} or fewer")


def run_budget(args: argparse.Namespace) -> int:
    from annotate.trace.model import budget, runtime

    check_memory_option(args.memory)   # before the checkpoint is read
    if args.tokens < 1:
        raise UserError(f"--tokens {args.tokens}: expected at least 1 token; pass --tokens 32")
    config = runtime.read_model_dir(args.model)
    check_tokens_option(args.tokens, config)
    runtime.check_depth(args.model, config)
    layers = runtime.resolve_layers(args.layers, int(config["num_hidden_layers"]), str(args.model))
    disk = sum(p.stat().st_size for p in args.model.glob("*.safetensors"))
    got = budget.estimate(config, layers, args.tokens, args.dtype, "cuda", disk)
    print(render_budget(got, layers, args.tokens, args.dtype))
    if args.memory is not None:
        budget.check_fits(got, int(args.memory * budget.GIB), f"a {args.memory:g} GiB device", f"--model {args.model}",
                          args.dtype)
        print(f"fits in {args.memory:g} GiB")
    return 0


def render_budget(b: Any, layers: int, tokens: int, dtype: str) -> str:
    from annotate.trace.model.budget import gib

    stages = b.stages()
    return "\n".join([
        f"trace of {layers} layers × {tokens} tokens in {dtype} on a CUDA device",
        f"  weights (one copy)              {gib(b.weights)}  (held twice: nano-vllm and HF transformers)",
        f"  rotary table                    {gib(b.rope)}",
        f"  recorded copies                 {gib(b.recorded)}",
        f"  HF forward, one layer           {gib(b.forward)}  (eager attention: heads × tokens² scores)",
        f"  cuBLAS workspace                {gib(b.workspace)}",
        f"  identification stacks           {gib(b.identify)}",
        f"  HF traced lines' copies         {gib(b.hf_recorded)}",
        f"  peak: reference stage           {gib(stages['reference'])}",
        f"  peak: HF traced lines stage     {gib(stages['hf lines'])}",
        f"  device memory                   {gib(b.device_memory)}  (the larger stage)",
        f"  disk: checkpoint                {gib(b.checkpoint_disk)}",
        f"  disk: trace --full-tensors      {gib(b.trace_disk)}",
    ])
