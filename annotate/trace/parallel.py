"""`annotate trace --tp N`: the vendored model on N ranks of torch.distributed, every rank recorded.

The launcher (this process) checks the options against the model, locks the output and starts N
rank processes (spawned: each one a fresh interpreter, so Dynamo compiles per rank as a real
deployment does). Each rank joins one process group — gloo on CPU, NCCL on GPUs (one GPU a rank) —
through the rendezvous `--init-method` names (default: `tcp://127.0.0.1:<free port>`), builds the
model with its shards through the vendored loader and `weight_loader`s, compiles, and records one
prefill with the same line recorder plus the tensor-parallel forwards (`RowParallelLinear.forward`,
`VocabParallelEmbedding.forward`: the partial sum before and the full sum after `all_reduce`).

Ranks 1…N−1 hand their records to rank 0 through a private folder and leave; rank 0 then runs a
`--tp 1` prefill of the same checkpoint, the HF peer, identifies every shard, partial sum and
post-all_reduce tensor (`annotate.trace.identify.shards`) and writes the trace atomically. A rank that fails
or is killed fails the run: the launcher stops every other rank and says which rank and why, in
one line; the previous trace stays.

Under `torchrun` (RANK / WORLD_SIZE / MASTER_ADDR set, `--init-method env://`), each process runs
its own rank and rank 0 writes: see docs/guide/tensor-parallel.md.
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import socket
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import urlparse

from annotate.errors import UserError
from annotate.progress import Progress
from annotate.trace.model.options import TraceOptions

#: how long a rank waits for the others in one collective (the first one waits out a peer's compile)
COLLECTIVE_TIMEOUT_S = 600
#: how long a rank waits for the others to meet at the rendezvous (they start within seconds of each other:
#: a rendezvous that cannot form is said in one line, not after the collectives' ten minutes)
RENDEZVOUS_TIMEOUT_S = 25
#: the environment variable that sets another rendezvous limit (seconds), e.g. for ranks started by hand on
#: several machines, or a short one to learn fast that a host does not answer
RENDEZVOUS_ENV = "ANNOTATE_RENDEZVOUS_TIMEOUT"
#: how long the launcher waits, after the first rank fails, for the others' causes to arrive
GRACE_S = 1.0
RANKS_DIR = "ranks"


@dataclass(frozen=True)
class Rendezvous:
    """How the ranks meet: torch.distributed's backend, init method and world size."""

    backend: str
    init_method: str
    world: int
    limit: float = RENDEZVOUS_TIMEOUT_S  # seconds the ranks have to meet (:func:`rendezvous_limit`)


def rendezvous_limit() -> float:
    """How long the ranks wait for each other: ``$ANNOTATE_RENDEZVOUS_TIMEOUT`` seconds when set, else
    :data:`RENDEZVOUS_TIMEOUT_S`; a value that is not a finite number of seconds in (0, 3600] is one line."""
    raw = os.environ.get(RENDEZVOUS_ENV)
    if raw is None or raw == "":
        return float(RENDEZVOUS_TIMEOUT_S)
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not (0 < value <= 3600):   # nan fails both comparisons
        raise UserError(f"{RENDEZVOUS_ENV}={raw[:40]!r}: expected the seconds the --tp ranks may take to meet, "
                        f"a number above 0 and at most 3600 (default {RENDEZVOUS_TIMEOUT_S}); set e.g. "
                        f"{RENDEZVOUS_ENV}=120, or unset it")
    return value


def free_port(host: str = "127.0.0.1") -> int:
    """A port nobody listens on now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def check_port(init_method: str) -> None:
    """A `tcp://` rendezvous on this machine whose port is taken is one line, before any rank starts
    (rank 0 would otherwise fail to bind its store after the others have started)."""
    url = urlparse(init_method)
    if url.scheme != "tcp" or url.hostname not in ("127.0.0.1", "localhost") or url.port is None:
        return
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((url.hostname, url.port))
        except OSError:
            raise UserError(f"--init-method {init_method}: port {url.port} on {url.hostname} is in use; "
                            "pass another port, or leave --init-method out to use a free one") from None


def check_file_store(init_method: str) -> None:
    """A `file://` rendezvous whose file cannot be made is one line, before any rank starts (each rank
    would otherwise wait out the collectives' timeout for a store that never opens). ``os.access`` says
    yes to root everywhere, ``/proc`` included, so a probe file is made beside it and removed at once."""
    url = urlparse(init_method)
    if url.scheme != "file":
        return
    path = Path(url.path)
    if not url.path or path.is_dir():
        raise UserError(f"--init-method {init_method}: expected file:///path/to/a/file (the ranks' shared store), "
                        "got a folder or no path; name a file in a writable folder, or leave --init-method out")
    try:
        handle, probe = tempfile.mkstemp(prefix=".annotate-rdv-probe-", dir=path.parent)
        os.close(handle)
        os.unlink(probe)
    except OSError as exc:
        raise UserError(f"--init-method {init_method}: the ranks cannot make their store in {path.parent} "
                        f"({exc.strerror or exc}); name a file in an existing, writable folder, or leave "
                        "--init-method out to use a free local port") from None


def rendezvous(opts: TraceOptions) -> Rendezvous:
    """The run's rendezvous: `--init-method` as given (a local tcp port and a file store's folder are
    checked), else a free port."""
    backend = "nccl" if opts.device == "cuda" else "gloo"
    limit = rendezvous_limit()
    if opts.init_method is None:
        return Rendezvous(backend, f"tcp://127.0.0.1:{free_port()}", opts.tp, limit)
    check_port(opts.init_method)
    check_file_store(opts.init_method)
    return Rendezvous(backend, opts.init_method, opts.tp, limit)


def torchrun_rank() -> tuple[int, int] | None:
    """(rank, world size) when this process was started by `torchrun` (its RANK / WORLD_SIZE), else None."""
    rank, world = os.environ.get("RANK"), os.environ.get("WORLD_SIZE")
    if rank is None or world is None or not (rank.isdigit() and world.isdigit()):
        return None
    return int(rank), int(world)


def check_torchrun_env() -> None:
    """RANK / WORLD_SIZE without MASTER_ADDR / MASTER_PORT is no torchrun start (torchrun sets all four):
    left over in a shell, they made `--tp` a torchrun rank whose rendezvous failed with a traceback."""
    missing = [k for k in ("MASTER_ADDR", "MASTER_PORT") if not os.environ.get(k)]
    if missing:
        given = " ".join(f"{k}={os.environ.get(k)}" for k in ("RANK", "WORLD_SIZE"))
        raise UserError(f"{given} are set but {' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} not: "
                        "torchrun sets all four; unset RANK and WORLD_SIZE to let --tp start its own ranks, "
                        "or start annotate under torchrun")


def run_parallel_trace(req: Any, progress: Progress) -> Any:
    """`annotate trace --tp N`: the pipeline's checks and output lock, then :func:`launch`. Under
    `torchrun`, a rank other than 0 writes nothing: it joins, records and hands its records over."""
    from annotate.trace import pipeline
    from annotate.trace.model.options import check_options

    check_options(req.options)
    ran = torchrun_rank()
    if ran is not None:
        check_torchrun_env()
        rank, world = ran
        if world != req.options.tp:
            raise UserError(f"--tp {req.options.tp}: torchrun started {world} processes (WORLD_SIZE); "
                            f"pass --tp {world} or --nproc-per-node/--nnodes that make {req.options.tp}")
        if rank != 0:
            opts = dataclasses.replace(req.options, layers=pipeline.effective_layers(req.options))
            run_rank(rank, _env_rendezvous(opts), req, opts, Path(), {}, {}, Path(), True)
            return None
    return pipeline.run_trace(req, progress, launch)


def _env_rendezvous(opts: TraceOptions) -> Rendezvous:
    """torchrun's rendezvous: MASTER_ADDR / MASTER_PORT from the environment."""
    return Rendezvous("nccl" if opts.device == "cuda" else "gloo", "env://", opts.tp, rendezvous_limit())


def launch(req: Any, opts: TraceOptions, out: Path, key: dict[str, Any], facts: dict[str, Any],
           progress: Progress) -> Any:
    """Start the N ranks, wait for them, fail the whole run when one fails; return rank 0's result."""
    import multiprocessing

    from annotate.trace import pipeline
    from annotate.trace.model import runtime

    runtime.resolve_model(opts)   # --tp against heads, kv-heads, F, vocabulary: before any process starts
    runtime.check_device(opts.device)
    if torchrun_rank() is not None:   # torchrun started this process as rank 0: no ranks to start
        with progress.step("ranks", f"rank 0 of {opts.tp} (torchrun): build, compile, record, identify, write"):
            run_rank(0, _env_rendezvous(opts), req, opts, out, key, facts, Path(), progress.quiet)
        return pipeline.TraceResult(out, False, written_payload(out), dict(progress.timings))
    runtime.check_ranks(opts.tp, opts.device)
    rv = rendezvous(opts)
    progress.say(f"[tp] {opts.tp} ranks, {rv.backend}, rendezvous {rv.init_method}")
    ctx = multiprocessing.get_context("spawn")
    with tempfile.TemporaryDirectory(prefix=f"{runtime.TEMP_PREFIX}tp-{os.getpid()}-") as work:
        procs = [ctx.Process(target=rank_main, args=(r, rv, req, opts, out, key, facts, Path(work), progress.quiet),
                             name=f"annotate-rank{r}", daemon=True) for r in range(opts.tp)]
        with progress.step("ranks", f"{opts.tp} ranks: build, compile, record; rank 0 identifies and writes"):
            try:
                with quiet_c10d():
                    for p in procs:
                        p.start()
                supervise(procs, Path(work), opts.tp)
            finally:
                stop(procs)
                runtime.sweep_temp()   # what a killed rank could not clean up (its checkpoint, its store)
    return pipeline.TraceResult(out, False, written_payload(out), dict(progress.timings))


#: the ranks' torch C++ log: errors only, no stack frames (a store retrying its connection printed hundreds
#: of lines a rank; what fails reaches the launcher as the rank's one line)
C10D_QUIET = {"TORCH_CPP_LOG_LEVEL": "FATAL", "TORCH_SHOW_CPP_STACKTRACES": "0"}


@contextlib.contextmanager
def quiet_c10d() -> Iterator[None]:
    """The environment a spawned rank starts with (read when it imports torch): :data:`C10D_QUIET`, unless the
    person set these variables (to debug, say)."""
    added = [k for k in C10D_QUIET if k not in os.environ]
    os.environ.update({k: C10D_QUIET[k] for k in added})
    try:
        yield
    finally:
        for key in added:
            os.environ.pop(key, None)


def written_payload(out: Path) -> dict[str, Any]:
    """The trace.json rank 0 has just written, read back as every reader reads a trace (records typed)."""
    from annotate.trace.format import store

    return store.read_payload(out)


def supervise(procs: list[Any], work: Path, tp: int, poll: float = 0.1) -> None:
    """Wait for every rank; when one fails, raise one line naming the first cause (a rank killed by
    a signal, else the earliest error a rank wrote); the caller stops the rest."""
    while True:
        codes = [p.exitcode for p in procs]
        if all(c == 0 for c in codes):
            return
        if any(c not in (None, 0) for c in codes):
            time.sleep(GRACE_S)   # the others' errors (a peer gone) follow the cause within moments
            raise UserError(f"--tp {tp}: {failure([p.exitcode for p in procs], work)}; "
                            "every rank was stopped and the previous trace is kept")
        time.sleep(poll)


def failure(codes: list[int | None], work: Path) -> str:
    """`rank 1 was killed (signal 9)` or `rank 1 failed: <its one line>`: the rank that went first."""
    killed = [(r, c) for r, c in enumerate(codes) if c is not None and c < 0]
    if killed:
        r, c = killed[0]
        return f"rank {r} was killed (signal {-c})"
    errors = sorted((f.stat().st_mtime, int(f.stem.removeprefix("rank")), f.read_text(encoding="utf-8").strip())
                    for f in work.glob("rank*.err"))
    if errors:
        _, r, line = errors[0]
        return f"rank {r} failed: {line}"
    r = next(r for r, c in enumerate(codes) if c not in (None, 0))
    return f"rank {r} exited with status {codes[r]}"


def stop(procs: list[Any]) -> None:
    """Kill every rank still running and reap it (no stray processes)."""
    for p in procs:
        if p.pid is not None and p.exitcode is None:
            p.kill()
    for p in procs:
        if p.pid is not None:
            p.join(5)


def _exit_with_parent(parent: int) -> None:
    """A rank whose launcher is gone (killed) exits instead of waiting in a collective."""
    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(3)
    threading.Thread(target=watch, daemon=True).start()


def rank_main(rank: int, rv: Rendezvous, req: Any, opts: TraceOptions, out: Path, key: dict[str, Any],
              facts: dict[str, Any], work: Path, quiet: bool) -> None:
    """One rank's process: join the group, then rank 0's pipeline or another rank's recording. Any
    error becomes one line in `work/rank<r>.err` and exit status 1 (the launcher reports it)."""
    _exit_with_parent(os.getppid())
    (work / f"rank{rank}.pid").write_text(f"{os.getpid()}\n", encoding="utf-8")   # who is who, for a person (or a test)
    try:
        run_rank(rank, rv, req, opts, out, key, facts, work, quiet)
    except BaseException as exc:   # one line for the launcher, never a traceback
        text = str(exc).strip().splitlines()
        line = text[0] if isinstance(exc, UserError) and text else f"{type(exc).__name__}: {text[0] if text else ''}"
        (work / f"rank{rank}.err").write_text(line[:300] + "\n", encoding="utf-8")
        sys.stderr.flush()
        os._exit(1)


def join_group(rank: int, rv: Rendezvous, device: str) -> None:
    """torch.distributed's group for this rank (one GPU a rank under NCCL): every rank meets the others
    within ``rv.limit`` seconds (:func:`meet`), then the group's collectives get the long timeout."""
    import torch
    import torch.distributed as dist

    if device == "cuda":
        torch.cuda.set_device(rank % max(torch.cuda.device_count(), 1))
    store = meet(rank, rv)
    store.set_timeout(timedelta(seconds=COLLECTIVE_TIMEOUT_S))
    dist.init_process_group(rv.backend, store=store, rank=rank, world_size=rv.world,
                            timeout=timedelta(seconds=COLLECTIVE_TIMEOUT_S))


def meet(rank: int, rv: Rendezvous) -> Any:
    """The rendezvous' store, once all ``rv.world`` ranks have checked in; a rendezvous that does not form
    within ``rv.limit`` seconds (a host that does not answer, a store that cannot open, a rank that never
    comes) is one UserError line."""
    limit = rv.limit
    deadline = time.monotonic() + limit
    try:
        store = _open_store(rank, rv, limit)
        joined = store.add("annotate/joined", 1)
        while joined < rv.world and time.monotonic() < deadline:
            time.sleep(0.1)
            joined = store.add("annotate/joined", 0)
    except UserError:
        raise
    except Exception as exc:   # torch's store errors carry C++ context: the first line says it
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:160]
        raise UserError(_no_rendezvous(rv, limit, reason)) from None
    if joined < rv.world:
        raise UserError(_no_rendezvous(rv, limit, f"{joined} of {rv.world} ranks arrived"))
    return store


def _open_store(rank: int, rv: Rendezvous, limit: float) -> Any:
    """torch's store for ``rv``, opened in a helper thread: a TCP store whose host accepts and never answers
    blocks its constructor past any timeout given to it, so this waits ``limit`` seconds at most."""
    from torch.distributed import rendezvous as torch_rendezvous

    got: dict[str, Any] = {}

    def open_it() -> None:
        try:
            got["store"] = next(torch_rendezvous(rv.init_method, rank, rv.world, timeout=timedelta(seconds=limit)))[0]
        except Exception as exc:
            got["error"] = exc

    opener = threading.Thread(target=open_it, name="annotate-rendezvous", daemon=True)
    opener.start()
    opener.join(limit)
    if opener.is_alive():
        raise UserError(_no_rendezvous(rv, limit, "its store did not answer"))
    if "error" in got:
        raise got["error"]
    return got["store"]


def _no_rendezvous(rv: Rendezvous, limit: float, reason: str) -> str:
    where = "MASTER_ADDR:MASTER_PORT" if rv.init_method == "env://" else "--init-method"
    return (f"--tp {rv.world}: the ranks did not meet at the rendezvous {rv.init_method} within {limit:g} s "
            f"({reason}); check {where} (a host and port every rank reaches, a file in a shared folder), "
            "or leave --init-method out to use a free local port")


def run_rank(rank: int, rv: Rendezvous, req: Any, opts: TraceOptions, out: Path, key: dict[str, Any],
             facts: dict[str, Any], work: Path, quiet: bool) -> None:
    """Rank 0: the whole pipeline with :class:`~annotate.trace.pipeline.RankHooks`; others: record and hand over."""
    from annotate.trace import pipeline

    join_group(rank, rv, opts.device)
    progress = Progress(quiet=quiet or rank != 0)
    if rank == 0:
        hooks = pipeline.RankHooks(gathered=lambda: gather(rv.world), extend=Extension(opts, progress).extend)
        pipeline._run_locked(req, opts, out, key, facts, progress, hooks)
    else:
        record_rank(rank, opts)


def record_rank(rank: int, opts: TraceOptions) -> None:
    """A rank other than 0: build, compile, record one prefill, hand the records to rank 0, leave."""
    import torch.distributed as dist

    from annotate.trace.model import runtime
    from annotate.trace.record.recorder import Recorder

    rt = runtime.build_runtime(opts)
    try:
        mods = runtime.import_vendored(opts.root, rt.device.type, runtime.traced_root(opts))
        runtime.run_prefill(rt)   # compile
        rec = Recorder(rt.model, mods, runtime.traced_root(opts), parallel=True, backend=opts.line_events)
        with rec.recording():
            runtime.run_prefill(rt)
        rec.uninstall()
        for r in rec.records:
            for v in r.vars:
                v.tensor = v.tensor.cpu()
        dist.gather_object(rec.records, None, dst=0)   # through the group: ranks may be on other machines
    finally:
        rt.close()
    dist.destroy_process_group()


def gather(world: int) -> list[Any]:
    """Rank 0, right after its recorded prefill: the other ranks' records (through the group), then
    the group closes."""
    import torch.distributed as dist

    got: list[Any] = [None] * world
    dist.gather_object(None, got, dst=0)
    dist.destroy_process_group()
    return got[1:]


class Extension:
    """Rank 0's additions to the payload: the other ranks' records, the --tp 1 comparison, the shards."""

    def __init__(self, opts: TraceOptions, progress: Progress) -> None:
        self.opts, self.progress = opts, progress

    def extend(self, payload: dict[str, Any], tensors: dict[str, Any], rec: Any, rt: Any, ref: Any,
               ranks: list[Any]) -> None:
        import torch

        from annotate.trace import assemble
        from annotate.trace.identify import shards
        from annotate.trace.identify.reference import Identifier

        opts, save = self.opts, bool(payload["meta"]["tensors_saved"])
        layers = int(rt.config["num_hidden_layers"])
        with self.progress.step("tp1", "the same prefill on one rank (--tp 1), recorded, for the post-all_reduce values"):
            one = tp1_records(opts)
        with self.progress.step("hf slices", "HF's projections, whose slices the shards are compared with"):
            hf = shards.hf_inner(rt.checkpoint, layers, rt.dtype, rt.input_ids)
        every = [rec.records, *ranks]
        ident = Identifier(ref)
        others = []
        for r, raws in enumerate(ranks, start=1):
            records, more = assemble.raw_records_payload(raws, ident, save, f"rank{r}/")
            tensors.update(more)
            others.append({"rank": r, "records": records})
        elem = torch.finfo(rt.dtype).bits // 8
        payload["ranks"] = others
        with self.progress.step("shards", "identifying every rank's shards, partial sums and reduced values"):
            payload["parallel"] = self._parallel(rec, rt, ref, every, one, hf, layers, elem)

    def _parallel(self, rec: Any, rt: Any, ref: Any, every: list[Any], one: list[Any], hf: Any, layers: int,
                  elem: int) -> dict[str, Any]:
        from annotate.trace.identify import shards

        opts, shape = self.opts, shards.Shape.of(rt.config, self.opts.tp)
        return {
            "tp": opts.tp, "backend": "nccl" if opts.device == "cuda" else "gloo",
            "shards": [s for r, raws in enumerate(every)
                       for s in shards.rank_shards(r, raws, hf, shape, layers, rt.input_ids.cpu())],
            "sums": shards.sums(every, ref, layers),
            "vs_tp1": shards.versus_tp1(rec.records, one),
            "bytes": {**shards.bytes_per_token(rt.config, elem, opts.tp),
                      "measured_per_all_reduce": measured_bytes(rec.records, int(rt.input_ids.numel()))},
        }


def measured_bytes(records: list[Any], tokens: int) -> list[int]:
    """Bytes per token of every tensor an all_reduce reduced on rank 0, as recorded (distinct sizes)."""
    from annotate.trace.identify.shards import ALL_REDUCE

    sizes = {v.tensor.numel() * v.tensor.element_size() // tokens
             for r in records if ALL_REDUCE in r.text for v in r.vars if v.name == "y"}
    return sorted(sizes)


def tp1_records(opts: TraceOptions) -> list[Any]:
    """Rank 0 alone, after the group closed: a --tp 1 prefill of the same checkpoint, recorded."""
    from annotate.trace.model import runtime
    from annotate.trace.record.recorder import Recorder

    runtime.init_process_group()   # a one-rank group again
    rt = runtime.build_runtime(dataclasses.replace(opts, tp=1, init_method=None))
    try:
        mods = runtime.import_vendored(opts.root, rt.device.type, runtime.traced_root(opts))
        runtime.run_prefill(rt)
        rec = Recorder(rt.model, mods, runtime.traced_root(opts), parallel=True, backend=opts.line_events)
        with rec.recording():
            runtime.run_prefill(rt)
        rec.uninstall()
        return rec.records
    finally:
        rt.close()
