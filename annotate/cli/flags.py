"""The output flags `annotate trace` and `annotate experiment` share: one definition, one help text.

Both commands write one trace folder atomically; these say what happens to the one already there
(--force, --if-stale), how much of it is written (--full-tensors) and how much is said (--quiet).
"""
from __future__ import annotations

import argparse


def add_output_flags(p: argparse.ArgumentParser, target: str) -> None:
    """--force, --if-stale, --full-tensors and --quiet on ``p``; ``target`` names what the command writes
    (``"--out"``, ``"traces/experiments/NAME"``)."""
    p.add_argument("--force", action="store_true", help=f"replace {target} when it already holds a trace")
    p.add_argument("--if-stale", action="store_true",
                   help=f"do nothing when {target} already holds a trace of the same inputs")
    p.add_argument("--full-tensors", action="store_true", help="store every recorded tensor, not only summaries")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
