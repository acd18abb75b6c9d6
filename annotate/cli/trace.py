"""`annotate trace`: parse the options, show progress, print the report. The work is in annotate.trace."""
from __future__ import annotations

import argparse
from pathlib import Path

from annotate.cli.flags import add_output_flags
from annotate.progress import Progress
from annotate.project import Project
from annotate.trace.model.options import BACKENDS, DEVICES, DTYPE_NAMES, PRESETS, TRACE_DEFAULTS, TraceOptions

HELP = "run the real (compiled) nano-vllm Qwen3 and record every line's values"
_DEFAULT = TRACE_DEFAULTS
_PRESET = PRESETS[_DEFAULT.preset]


def epilog() -> str:
    """The help's closing lines; its "defaults:" line is built from the one home of the defaults."""
    return (f"defaults: --preset {_DEFAULT.preset} --layers {_PRESET.default_layers} --tokens {_PRESET.default_tokens} "
            f"--dtype {_DEFAULT.dtype} --device {_DEFAULT.device} --seed {_DEFAULT.seed}\n"
            f"output:   {Project.TRACES_DIR}/<device> for the default trace, else "
            f"{Project.TRACES_DIR}/<device>-<dtype>-<model>-<N>L-<T>T\n"
            "          (a directory: trace.json + optional tensors.safetensors; see docs/trace-format.md)\n"
            f"--prompt without --model: Qwen3's own tokenizer (node_modules, `make install`); on a preset whose\n"
            "          vocabulary is smaller than Qwen3's (tiny), the text's UTF-8 bytes are the token ids\n"
            f"without --tokens / --prompt, {_DEFAULT.preset} reads the lesson's sentence: {_PRESET.default_prompt}\n")


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the `trace` sub-command (defaults and choices from annotate.trace.model.options)."""
    p = subparsers.add_parser("trace", help=HELP, description=HELP, epilog=epilog(),
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", default=_DEFAULT.preset,
                   help=f"model shape with random weights: {' | '.join(PRESETS)}")
    p.add_argument("--layers", type=int, default=_DEFAULT.layers,
                   help=f"decoder layers to build (default {_PRESET.default_layers}; the full depth for --model)")
    src = p.add_mutually_exclusive_group()
    per_preset = "; ".join(f"{name}: {pr.default_tokens}" for name, pr in PRESETS.items() if name != _DEFAULT.preset)
    src.add_argument("--tokens", type=int, default=_DEFAULT.tokens,
                     help=f"prompt length in random token ids (default: {_PRESET.default_tokens}; {per_preset})")
    src.add_argument("--prompt", default=_DEFAULT.prompt, help="prompt text (tokenizer of --model, else Qwen3's own)")
    p.add_argument("--model", type=Path, default=_DEFAULT.model,
                   help="a local Qwen3 checkpoint folder (config.json + *.safetensors)")
    p.add_argument("--dtype", default=_DEFAULT.dtype, choices=DTYPE_NAMES)
    p.add_argument("--device", default=_DEFAULT.device, choices=DEVICES)
    p.add_argument("--seed", type=int, default=_DEFAULT.seed, help="seed of the random weights and token ids")
    p.add_argument("--tp", type=int, default=_DEFAULT.tp,
                   help="tensor-parallel ranks on torch.distributed (gloo on CPU, NCCL on GPUs); every rank is recorded")
    p.add_argument("--init-method", default=_DEFAULT.init_method,
                   help="rendezvous of the --tp ranks (any torch.distributed init method: tcp://HOST:PORT, "
                        "file:///PATH, env:// under torchrun; default tcp://127.0.0.1:<free port>)")
    p.add_argument("--out", type=Path, help="trace directory to write (default: see below)")
    add_output_flags(p, "--out")
    p.add_argument("--line-events", default=_DEFAULT.line_events, choices=BACKENDS,
                   help="where the recorder's line events come from: monitoring (sys.monitoring, Python 3.12+; "
                        "the default there) or settrace (the default before 3.12); the records are the same")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Trace (the pipeline checks the options first), print the report and the time breakdown. With
    --if-stale, an up-to-date trace is found without importing torch (annotate/trace/freshness.py)."""
    from annotate.trace.freshness import TraceRequest, up_to_date

    root = Path(args.root)
    out = args.out if args.out is None or args.out.is_absolute() else root / args.out
    opts = TraceOptions(preset=args.preset, layers=args.layers, tokens=args.tokens, prompt=args.prompt,
                        model=args.model, dtype=args.dtype, device=args.device, seed=args.seed, root=root,
                        tp=args.tp, init_method=args.init_method, line_events=args.line_events)
    progress = Progress(quiet=args.quiet)
    req = TraceRequest(opts, out, args.force, args.full_tensors, args.if_stale)
    fresh = up_to_date(req) if args.if_stale else None
    if fresh is not None:
        progress.say(f"[trace] {fresh} is up to date; nothing to do")
        return 0
    from annotate.trace.pipeline import run_trace
    from annotate.trace.reports.report import render

    if opts.tp > 1:
        from annotate.trace.parallel import run_parallel_trace

        result = run_parallel_trace(req, progress)
        if result is None:   # a rank other than 0 under torchrun: rank 0 reports
            return 0
    else:
        result = run_trace(req, progress)
    if result.skipped:
        return 0
    print(render(result.payload, str(result.out), root))
    print(progress.breakdown())
    return 0
