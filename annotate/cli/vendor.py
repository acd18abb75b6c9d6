"""`annotate vendor sync|status|update`: argument parsing and progress; the work is in annotate.vendoring."""
from __future__ import annotations

import argparse
import importlib
import json
from pathlib import Path
from types import ModuleType

from annotate import vendoring
from annotate.errors import UserError
from annotate.progress import Progress
from annotate.project import Project


def register(sub: argparse._SubParsersAction) -> None:
    vendor = sub.add_parser("vendor",
                            help="materialise, inspect or move the vendored upstreams (nano-vllm, HF transformers, vLLM)",
                            description="The vendored upstreams, one lock each (vendor/<name>.lock.json): "
                                        "materialised from the lock, never committed.")
    actions = vendor.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True

    sync = actions.add_parser("sync", help="materialise every vendor/<name>/ from its lock (verifies; fast no-op when in place)",
                              description="Fetch the lock's source (the pinned wheel by default, offline from the "
                              "cache once downloaded), verify its sha256 before reading it, refuse unsafe members, "
                              "write to a temp folder and swap it in. Hand edits under vendor/ are restored.")
    sync.set_defaults(func=run_sync)

    status = actions.add_parser("status", help="the upstream pin, the source, and per file: identical or which lines are local-only",
                                description="Tell exactly what you are reading: pinned upstream commit, where the "
                                "local copy came from, per file whether it equals upstream (git blob id) or which "
                                "local lines have no upstream counterpart, and any file edited since sync.")
    status.add_argument("--json", action="store_true", help="machine-readable output")
    status.set_defaults(func=run_status)

    update = optional_module("annotate.cli.vendor_update")
    if update is not None:
        update.register(actions)


def run_sync(args: argparse.Namespace) -> int:
    root = Path(args.root)
    if not (root / Project.VENDOR_DIR).is_dir() and not (root / Project.CONFIG_NAME).is_file():
        raise UserError(f"--root {root}: has neither {Project.VENDOR_DIR}/ nor {Project.CONFIG_NAME}, so it is not "
                        "the project root; run from the project or pass --root (nothing was written)")
    from annotate.vendoring.registry import Registry

    Registry(root)   # every lock read and checked first: two locks sharing a path name the stray one
    progress = Progress()
    for upstream in vendoring.vendors(args.root):
        with progress.step("sync", f"materialising {upstream.dir} from {upstream.lock_name}"):
            result = vendoring.sync(args.root, upstream=upstream)
        if not result.changed:
            progress.say(f"{upstream.dir} is up to date: {_files(result.files)} verified against the lock")
            continue
        progress.say(f"{upstream.dir} materialised: {_files(result.files)}")
        if result.restored:
            progress.say(f"restored {len(result.restored)} file(s) that differed from the lock: {', '.join(result.restored)}")
        if result.lock_updated:
            progress.say(f"recorded local file hashes in {upstream.lock_name}")
    return 0


def _files(n: int) -> str:
    return f"{n} file" if n == 1 else f"{n} files"


def run_status(args: argparse.Namespace) -> int:
    from annotate.vendoring.registry import Registry
    from annotate.vendoring.status import render_all

    Registry(args.root)   # two locks sharing a path: one line naming the stray one, not 'files differ'
    reports = [vendoring.status(args.root, vendoring.read_lock(args.root / u.lock_name), u)
               for u in vendoring.vendors(args.root)]
    print(json.dumps({"upstreams": [r.to_json() for r in reports]}, indent=1, ensure_ascii=False)
          if args.json else render_all(reports))
    return 1 if any(r.modified for r in reports) else 0


def optional_module(name: str) -> ModuleType | None:
    """Import a command module that may not exist yet, without hiding errors inside it."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name != name:
            raise
        return None
