"""`annotate vendor update`: argument parsing, progress and output; the work is in annotate.update."""
from __future__ import annotations

import argparse
import json

from annotate.progress import Progress

UPDATE_DESCRIPTION = """\
Move one upstream's pin (nano-vllm by default; --upstream transformers|vllm) to another commit.

Reads COMMIT from the git repository (a URL, or a local clone with no uncommitted changes),
recomputes the lock's upstream facts (blob ids, per-line hashes) from those exact files, and
reports for every note and prose reference: unchanged, moved (old -> new line), changed (the
statement is gone; nearest candidates listed) or vanished (the symbol is gone). Then it swaps in
the new vendor/<upstream> folder and lock atomically; with --dry-run it writes nothing.

Afterwards: fix what the report lists, run `annotate check` until it is clean, then `make site`.
"""


def register(actions: argparse._SubParsersAction) -> None:
    """Add `vendor update` to the `annotate vendor` sub-commands."""
    parser = actions.add_parser("update", help="move the pin to another upstream commit and report what the notes do",
                                description=UPDATE_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--git", required=True, metavar="URL_OR_PATH",
                        help="the upstream repository: a URL or a local clone")
    parser.add_argument("--rev", required=True, metavar="COMMIT", help="the commit to pin (any name git resolves)")
    parser.add_argument("--repo-url", metavar="URL",
                        help="web address for permalinks (default: --git when it is http(s), else the current pin's)")
    parser.add_argument("--upstream", default="nano-vllm", metavar="NAME",
                        help="which upstream's pin moves: vendor/NAME.lock.json (default nano-vllm; also transformers, vllm)")
    parser.add_argument("--dry-run", action="store_true", help="show the report; change nothing")
    parser.add_argument("--json", action="store_true", help="machine-readable report on stdout")
    parser.set_defaults(func=run_update)


def run_update(args: argparse.Namespace) -> int:
    """Plan, report, and (unless --dry-run) apply; bad input is one UserError line, nothing written."""
    from annotate import update  # imported here: it needs tree-sitter, which `annotate trace` must not

    from annotate.errors import UserError
    from annotate.vendoring.registry import vendors

    progress = Progress()
    root = args.root
    known = {v.name: v for v in vendors(root)}
    if args.upstream not in known:
        raise UserError(f"--upstream {args.upstream!r}: no vendor/{args.upstream}.lock.json; "
                        f"use one of {', '.join(known)}")
    upstream = known[args.upstream]
    lock = update.read_lock(root / upstream.lock_name)
    with progress.step("fetch", f"reading {args.rev} from {args.git}"):
        commit = update.read_source(args.git, args.rev, lock, upstream)
    with progress.step("resolve", f"recomputing upstream facts for {len(commit.files)} files and resolving notes"):
        plan = update.plan_from_commit(root, commit, args.git, args.repo_url, upstream=upstream)
    if not args.dry_run:
        with progress.step("apply", f"swapping in {upstream.dir} and {upstream.lock_name}"):
            update.apply_update(root, plan)
    if args.json:
        print(json.dumps(plan.to_json() | {"applied": not args.dry_run}, indent=1, ensure_ascii=False))
    else:
        print(update.render(plan, applied=not args.dry_run))
    return 0
