"""`annotate experiment NAME`: parse the options, show progress, print a short report. The work is in
annotate.experiment_run."""
from __future__ import annotations

import argparse
from pathlib import Path

from annotate.cli.flags import add_output_flags
from annotate.progress import Progress
from annotate.trace.model.options import DEVICES, DTYPE_NAMES, PRESETS

EXPERIMENT_HELP = "apply experiments/NAME.yml to a scratch copy of nano-vllm and trace it like its baseline"
#: command-line options that override the experiment's `baseline:` (same names as `annotate trace`'s)
OVERRIDES = ("preset", "layers", "tokens", "model", "dtype", "device", "seed")


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the `experiment` sub-command; trace options default to the experiment file's `baseline:`."""
    p = subparsers.add_parser("experiment", help=EXPERIMENT_HELP, description=EXPERIMENT_HELP,
                              epilog="output: traces/experiments/NAME (the baseline: the trace `annotate trace` "
                                     "writes with the same options)")
    p.add_argument("name", help="the experiment: a file experiments/NAME.yml")
    p.add_argument("--preset", choices=list(PRESETS), help="override the baseline's preset")
    p.add_argument("--layers", type=int, help="override the baseline's decoder layers")
    p.add_argument("--tokens", type=int, help="override the baseline's prompt length")
    p.add_argument("--model", type=Path, help="a local Qwen3 checkpoint folder instead of a preset")
    p.add_argument("--dtype", choices=DTYPE_NAMES, help="override the baseline's dtype")
    p.add_argument("--device", choices=DEVICES, help="override the baseline's device")
    p.add_argument("--seed", type=int, help="override the baseline's seed")
    add_output_flags(p, "traces/experiments/NAME")
    p.set_defaults(func=run_experiment_command)


def run_experiment_command(args: argparse.Namespace) -> int:
    from annotate.experiment_run import ExperimentRequest, run_experiment

    root = Path(args.root)
    overrides = {k: getattr(args, k) for k in OVERRIDES if getattr(args, k) is not None}
    progress = Progress(quiet=args.quiet)
    result = run_experiment(ExperimentRequest(args.name, root, overrides, args.force, args.if_stale,
                                              args.full_tensors), progress)
    if not result.skipped:
        final = result.payload["summary"]["final_vs_hf"]
        print(f"[experiment] wrote {result.out}; final output vs HF: max |Δ| {final['max_abs']:.3g} "
              f"(rel {final['rel']:.3g})")
        print(progress.breakdown())
    return 0
