"""`annotate trace`: parse the options, show progress, print the report. The work is in annotate.trace."""
from __future__ import annotations

import argparse
from pathlib import Path

from annotate.errors import UserError
from annotate.progress import Progress

HELP = "run the real (compiled) nano-vllm Qwen3 and record every line's values"
EPILOG = """\
defaults: --preset qwen3-0.6b --layers 4 --tokens 32 --dtype bfloat16 --device cpu --seed 0
output:   traces/<device> for the default trace, else traces/<device>-<dtype>-<model>-<N>L-<T>T
          (a directory: trace.json + optional tensors.safetensors; see docs/trace-format.md)
--prompt without --model: the text's UTF-8 bytes are the token ids (mod the vocabulary size)
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the `trace` sub-command."""
    p = subparsers.add_parser("trace", help=HELP, description=HELP, epilog=EPILOG,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", default="qwen3-0.6b", help="model shape with random weights: tiny | qwen3-0.6b")
    p.add_argument("--layers", type=int, help="decoder layers to build (default 4; the full depth for --model)")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--tokens", type=int, help="prompt length in random token ids (default: 32; tiny: 12)")
    src.add_argument("--prompt", help="prompt text (tokenizer of --model, else UTF-8 bytes)")
    p.add_argument("--model", type=Path, help="a local Qwen3 checkpoint folder (config.json + *.safetensors)")
    p.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float16", "float32"))
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    p.add_argument("--seed", type=int, default=0, help="seed of the random weights and token ids")
    p.add_argument("--out", type=Path, help="trace directory to write (default: see below)")
    p.add_argument("--force", action="store_true", help="replace an existing --out")
    p.add_argument("--if-stale", action="store_true", help="do nothing when --out already holds a trace of the same inputs")
    p.add_argument("--full-tensors", action="store_true", help="store every recorded tensor, not only summaries")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Validate, trace, print the report and the time breakdown."""
    from annotate.trace.pipeline import TraceRequest, run_trace
    from annotate.trace.report import render
    from annotate.trace.runtime import TraceOptions

    root = Path(args.root)
    if args.tokens is not None and args.tokens < 1:
        raise UserError(f"--tokens {args.tokens}: need at least 1 token")
    out = args.out if args.out is None or args.out.is_absolute() else root / args.out
    opts = TraceOptions(preset=args.preset, layers=args.layers, tokens=args.tokens, prompt=args.prompt,
                        model=args.model, dtype=args.dtype, device=args.device, seed=args.seed, root=root)
    progress = Progress(quiet=args.quiet)
    result = run_trace(TraceRequest(opts, out, args.force, args.full_tensors, args.if_stale), progress)
    if result.skipped:
        return 0
    print(render(result.payload, str(result.out), root))
    print(progress.breakdown())
    return 0
