"""`annotate experiment NAME`: apply an experiment to a scratch copy and trace it like its baseline.

The baseline is the trace `annotate trace` records with the experiment's ``baseline:`` options
(command-line options override them); the experiment's trace goes to
``traces/experiments/<name>/`` through the same pipeline, with ``vendored`` pointing at the scratch
copy. The trace's ``vendor`` block holds the hashes of the bytes really traced, and its
``experiment`` block the edits (baseline and edited line spans) and the baseline files' hashes,
so a reader can tell "recorded against edited bytes" from "recorded against stale bytes".

An edit that makes the model fail is one line: the edited file, line, and exception; nothing is
written and the baseline is untouched. So is an edit that ends the run early: ``raise SystemExit(0)``
(not an ``Exception``) and ``os._exit(0)`` (which skips everything, so while the edited model runs it
raises :class:`EditedModelExit` in this process instead) would otherwise exit 0 with no trace. The
scratch copy is removed whatever happens.
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import shutil
import tempfile
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, NoReturn

from annotate import experiments
from annotate.errors import UserError
from annotate.progress import Progress
from annotate.project import Project
from annotate.trace.model.options import TraceOptions, check_options
from annotate.vendoring.lock import sha256_bytes


@dataclass
class ExperimentRequest:
    """Parsed command line of `annotate experiment`."""

    name: str
    root: Path
    overrides: dict[str, Any]  # trace options given on the command line (None ones left out)
    force: bool = False
    if_stale: bool = False
    full_tensors: bool = False


def experiment_out(root: Path, name: str) -> Path:
    return root / Project.EXPERIMENT_TRACES_DIR / name


def options_for(experiment: experiments.Experiment, root: Path, overrides: dict[str, Any]) -> TraceOptions:
    """The baseline's trace options: the experiment's ``baseline:``, then the command line's."""
    opts = TraceOptions(root=root, **{**experiment.baseline, **overrides})
    check_options(opts)
    return opts


def baseline_out(opts: TraceOptions) -> Path:
    """Where `annotate trace` with these options writes: the baseline this experiment is compared with."""
    from annotate.trace.freshness import default_out

    return default_out(dataclasses.replace(opts, vendored=None), opts.root)


def record(experiment: experiments.Experiment, applied: list[experiments.AppliedEdit], vendor: Path,
           baseline: Path, root: Path) -> dict[str, Any]:
    """The trace's ``experiment`` block: what was edited, where, and against which baseline bytes."""
    return {"name": experiment.name, "file": experiment.label,
            "baseline": baseline.relative_to(root).as_posix() if baseline.is_relative_to(root) else str(baseline),
            "edits": [a.to_json() for a in applied],
            "baseline_files": {p: sha256_bytes((vendor / p).read_bytes()) for p in experiment.files}}


def run_experiment(req: ExperimentRequest, progress: Progress) -> Any:
    """Apply, trace, clean up; returns the pipeline's TraceResult. With --if-stale an up-to-date
    experiment trace is found before torch is imported (annotate/trace/freshness.py), and then the
    result is a skipped TraceResult."""
    from annotate.trace.freshness import TraceRequest, TraceResult, up_to_date
    from annotate.trace.model.options import TEMP_PREFIX, vendor_root

    experiment = experiments.load_experiment(req.root, req.name)
    opts = options_for(experiment, req.root, req.overrides)
    vendor = vendor_root(req.root)
    scratch = Path(tempfile.mkdtemp(prefix=f"{TEMP_PREFIX}exp-{os.getpid()}-"))
    try:
        edited = scratch / vendor.name
        applied = experiments.apply(experiment, vendor, edited)
        block = record(experiment, applied, vendor, baseline_out(opts), req.root)
        trace_req = TraceRequest(dataclasses.replace(opts, vendored=edited), experiment_out(req.root, req.name),
                                 req.force, req.full_tensors, req.if_stale, experiment=block)
        fresh = up_to_date(trace_req) if req.if_stale else None
        if fresh is not None:
            progress.say(f"[experiment] {experiment.label}: {fresh} is up to date; nothing to do")
            return TraceResult(fresh, True)
        progress.say(f"[experiment] {experiment.label}: {len(applied)} edit(s) applied to a scratch copy; "
                     f"compared with the baseline {block['baseline']}")
        from annotate.trace.pipeline import run_trace

        try:
            with exits_raise():
                return run_trace(trace_req, progress)
        except (UserError, KeyboardInterrupt):
            raise
        except BaseException as exc:  # the edited model failed or exited: say where, keep everything as it was
            raise UserError(failure_line(experiment, exc, edited)) from None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


class EditedModelExit(BaseException):
    """``os._exit`` called while the edited model ran (a BaseException: the model's ``except Exception``
    cannot swallow it)."""


_REAL_EXIT = os._exit


def _real_exit_in_children() -> None:
    os._exit = _REAL_EXIT


os.register_at_fork(after_in_child=_real_exit_in_children)   # a forked helper (compile workers) exits for real


@contextlib.contextmanager
def exits_raise() -> Iterator[None]:
    """While the edited model runs, ``os._exit`` in this process raises :class:`EditedModelExit` instead of
    ending it silently with status 0 (a process forked meanwhile gets the real one back)."""
    def guarded(status: int) -> NoReturn:
        raise EditedModelExit(f"os._exit({status})")

    os._exit = guarded
    try:
        yield
    finally:
        os._exit = _REAL_EXIT


_FILE_LINE = re.compile(r'File "([^"]+)", line (\d+)')


def failure_line(experiment: experiments.Experiment, exc: BaseException, edited: Path) -> str:
    """One line: the experiment, the edited file:line the model failed on (if known), and the exception."""
    where = _failing_place(exc, edited)
    message = (str(exc).strip().splitlines() or [""])[0][:200]
    at = f" at {where}" if where else ""
    if isinstance(exc, (SystemExit, EditedModelExit)):
        how = message if isinstance(exc, EditedModelExit) else f"SystemExit({message})"
        return (f"{experiment.label}: the edited model exited{at} ({how}) before its trace was written; "
                "remove the exit from the replacement (nothing was written, the baseline is unchanged)")
    return (f"{experiment.label}: the edited model failed{at}: {type(exc).__name__}: {message}; "
            "fix the edit (nothing was written, the baseline is unchanged)")


def _failing_place(exc: BaseException, edited: Path) -> str | None:
    """The innermost ``file:line`` inside the edited copy, from the tracebacks and (torch.compile) messages."""
    base = str(edited.resolve())
    found: str | None = None
    seen: set[int] = set()
    chain: BaseException | None = exc
    while chain is not None and id(chain) not in seen:
        seen.add(id(chain))
        places = [(f.filename, f.lineno) for f in traceback.extract_tb(chain.__traceback__)]
        places += [(m.group(1), int(m.group(2))) for m in _FILE_LINE.finditer(str(chain))]
        for filename, line in places:
            if filename.startswith(base):
                found = f"{Path(filename).resolve().relative_to(base).as_posix()}:{line}"
        chain = chain.__cause__ or chain.__context__
    return found
