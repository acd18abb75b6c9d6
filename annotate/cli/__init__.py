"""`annotate` command line: argument parsing and progress only; the work lives in the rooms.

Each sub-command group registers itself from its own module (vendor, trace, site) so the
parsers stay small and the rooms stay independent of each other.
"""
from __future__ import annotations

import argparse
import errno
import sys
from pathlib import Path
from typing import Sequence

from annotate.errors import UserError

CLI_DESCRIPTION = """\
Annotated source reader for nano-vllm.

Journeys:
  annotate vendor sync       materialise vendor/nano-vllm from the lock (offline wheel by default)
  annotate vendor status     what you are reading: upstream pin, source, identical files, local-only lines
  annotate vendor update     move the pin to another upstream commit and report what the notes do
  annotate check             resolve every note and prose reference against the vendored code
  annotate trace             run the real (compiled) nano-vllm Qwen3 and record every line's values
  annotate experiment NAME   change nano-vllm by anchor (experiments/NAME.yml) on a scratch copy and trace it
  annotate budget --model D  memory and disk a trace of a local checkpoint needs (refuses with --memory GiB)
  annotate native            compile the recorder's per-line code with mypyc (optional; same records, a little faster)
  annotate build / serve     build or serve the site (MkDocs, with this project's plugin)
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="annotate", description=CLI_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--root", type=Path, default=Path("."), help="project root (default: current folder)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    from annotate.cli import vendor

    vendor.register(sub)
    for name in ("site", "trace", "experiment", "budget", "native"):
        module = vendor.optional_module(f"annotate.cli.{name}")
        if module is not None:
            module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; every refusal is one line, and Ctrl-C at any point (the parser's imports of the
    rooms take most of the first ~0.1 s) is exit 130 with one line, never a KeyboardInterrupt traceback."""
    try:
        args = build_parser().parse_args(argv)
        if not args.root.is_dir():
            raise UserError(f"--root {args.root}: no such folder; pass the project root (the folder with mkdocs.yml)")
        return int(args.func(args) or 0)
    except UserError as exc:
        print(f"annotate: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EROFS):
            raise
        where = f" writing {exc.filename}" if exc.filename else ""
        print(f"annotate: error: {exc.strerror}{where}; free space (or make it writable) and run again; "
              "nothing half-written was kept", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("annotate: interrupted; nothing half-written was kept", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
