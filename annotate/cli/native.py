"""`annotate native`: compile the recorder's hot path with mypyc for this interpreter (see annotate/trace/record/native.py).

Optional: without a C compiler, the interpreter's headers or mypy, it says which one is missing and
exits 2, and every command still works, with the recorder running as Python (same records, slower).
"""
from __future__ import annotations

import argparse

NATIVE_HELP = ("compile the recorder's per-line code with mypyc for this Python (optional: the same records, "
               "about a tenth less recording overhead, measured in bench/bench_trace.py); a no-op when the build "
               "matches the sources")


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("native", help=NATIVE_HELP, description=NATIVE_HELP)
    p.add_argument("--status", action="store_true", help="only say whether this Python would load a build, and why")
    p.add_argument("--force", action="store_true", help="rebuild even when the build matches the sources")
    p.set_defaults(func=run_native)


def run_native(args: argparse.Namespace) -> int:
    from annotate.progress import Progress
    from annotate.trace.record import native

    if args.status:
        print(f"native recorder: {native.load_plan().status}")
        return 0
    from annotate.trace.record import native_build

    native_build.build_native(Progress(), force=args.force)
    return 0
