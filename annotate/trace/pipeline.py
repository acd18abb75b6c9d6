"""One `annotate trace` run: build → compile → record → reference → identify → write.

The CLI only parses arguments and shows progress; every step lives here, and each is timed
into the `Progress` it is given (the trace stores the breakdown too).
"""
from __future__ import annotations

import dataclasses
import datetime as dt
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch

from annotate import guard, interrupts
from annotate.errors import UserError
from annotate.progress import Progress
from annotate.trace import assemble
from annotate.trace.model import internals, kernels, runtime
from annotate.trace.record import native, sourcemap
from annotate.trace.format import provenance, store
from annotate.trace.freshness import TraceRequest, TraceResult, default_out, effective_layers, inputs_key
from annotate.trace.model.options import TraceOptions, check_options
from annotate.trace.record.recorder import Recorder
from annotate.trace.identify.hf_lines import nano_index, summary as hf_summary
from annotate.trace.identify.reference import MARGIN, RULE, TOLERANCE, Identifier, run_reference

@dataclass
class RankHooks:
    """What a --tp run adds to rank 0's pipeline (`annotate.trace.parallel` fills it in; this module
    knows nothing of processes): ``gathered`` runs right after the recorded prefill (the other ranks
    wait for it: their records arrive, the group closes); ``extend`` adds the per-rank payload before
    the write (payload, tensors, rank 0's recorder, the runtime, the peer, the other ranks' records)."""

    gathered: Callable[[], Any]
    extend: Callable[[dict[str, Any], dict[str, torch.Tensor], Recorder, runtime.Runtime, Any, Any], None]


def _delta(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    return {k: after[k] - before.get(k, 0) for k in after}


#: runs a --tp trace's ranks once the output is locked: (request, options, out, inputs key, vendor facts, progress)
Launch = Callable[[TraceRequest, TraceOptions, Path, dict[str, Any], dict[str, Any], Progress], TraceResult]


def run_trace(req: TraceRequest, progress: Progress, launch: Launch | None = None) -> TraceResult:
    """Run one trace and write it; skip when --if-stale finds an up-to-date one. A --tp run needs
    ``launch`` (`annotate.trace.parallel.run_parallel_trace` passes it): it starts the ranks."""
    check_options(req.options)  # bad values are refused before anything is locked or written
    root = req.options.root
    opts = dataclasses.replace(req.options, layers=effective_layers(req.options))
    out = req.out or default_out(req.options, root)
    facts = provenance.vendor_facts(root, opts.vendored)
    key = inputs_key(req, facts)
    with guard.output_lock(root, out, "--out"):  # also puts back a trace an interrupted swap moved aside
        if req.if_stale and out.exists():
            reason = store.payload_matches(out, key)
            if reason is None:
                progress.say(f"[trace] {out} is up to date; nothing to do")
                return TraceResult(out, True)
            progress.say(f"[trace] {reason}; regenerating")
            if not (out / store.JSON_NAME).is_file():
                raise UserError(f"--out {out}: exists and is not a trace directory; choose another --out")
        store.check_out(out, req.force or (req.if_stale and (out / store.JSON_NAME).is_file()), root)
        internals.require()
        sourcemap.require_parser()   # the recorder maps lines to statements with tree-sitter
        if opts.tp > 1:
            if launch is None:
                raise UserError(f"--tp {opts.tp}: a tensor-parallel run starts its ranks through "
                                "`annotate trace --tp N`; call annotate.trace.parallel.run_parallel_trace")
            return launch(req, opts, out, key, facts, progress)
        return _run_locked(req, opts, out, key, facts, progress)


def _run_locked(req: TraceRequest, opts: TraceOptions, out: Path, key: dict[str, Any],
                facts: dict[str, Any], progress: Progress, hooks: RankHooks | None = None) -> TraceResult:
    """Build, trace and write (the output already locked by the caller: this process, or the
    launcher of a --tp run whose rank 0 runs this with ``hooks``)."""
    with interrupts.watched() as interrupted:  # a Ctrl-C swallowed inside torch.compile still stops the run
        capture = kernels.capture()
        with progress.step("build", "writing the checkpoint and building the vendored model"):
            rt = runtime.build_runtime(opts)
        try:
            return _traced(req, opts, rt, out, key, facts, capture, progress, interrupted, hooks)
        finally:
            rt.close()


def _traced(req: TraceRequest, opts: TraceOptions, rt: runtime.Runtime, out: Path,
            key: dict[str, Any], facts: dict[str, Any], capture: kernels.KernelCapture,
            progress: Progress, interrupted: Callable[[], None] = lambda: None,
            hooks: RankHooks | None = None) -> TraceResult:
    root = opts.root
    mods = runtime.import_vendored(root, rt.device.type, runtime.traced_root(opts))
    first_module = len(capture.modules)
    before = internals.dynamo_counts()
    with progress.step("compile", "first prefill: torch.compile (Inductor) of the fused functions"):
        plain = runtime.run_prefill(rt)
    interrupted()
    compiled = _delta(internals.dynamo_counts(), before)
    rec = Recorder(rt.model, mods, runtime.traced_root(opts), parallel=opts.tp > 1, backend=opts.line_events)
    before = internals.dynamo_counts()
    with progress.step("record", "second prefill under the line recorder, replaying compiled bodies eagerly"):
        with rec.recording():
            traced = runtime.run_prefill(rt)
    while_recording = _delta(internals.dynamo_counts(), before)
    rec.uninstall()
    ranks = hooks.gathered() if hooks is not None else None
    interrupted()
    layers = int(rt.config["num_hidden_layers"])
    with progress.step("reference", "HF transformers Qwen3 on the same checkpoint"):
        ref = run_reference(rt.checkpoint, layers, rt.dtype, rt.device, rt.input_ids)
    with progress.step("identify", "matching every recorded tensor against the peer's variables"):
        save = req.full_tensors or assemble.total_bytes(rec.records) <= assemble.AUTO_SAVE_BYTES
        ident = Identifier(ref)   # one for nano-vllm's records and HF's lines: its candidate stacks are built once
        records, tensors = assemble.records_payload(rec, ident, save)
        math = assemble.math_payload(ref, records, save, tensors)
        checks = assemble.checks_payload(rec)
    with progress.step("hf lines", f"HF transformers' own lines under the same recorder (eager, {rt.device.type})"):
        # after identify: each HF row is measured against the nano-vllm tensor identified as its math variable
        hf_lines = hf_summary(root, rt.checkpoint, layers, rt.dtype, rt.input_ids, ref,
                              nano_index(records, rec.records), ident)
    payload: dict[str, Any] = {
        "meta": _meta(opts, rt, rec, ref, key, compiled, while_recording, bool(torch.equal(plain, traced)),
                      save, progress.timings),
        "vendor": facts,
        "functions": assemble.functions_payload(rec),
        "records": records,
        "math": math,
        "compiled_checks": checks,
        "kernels": assemble.kernels_payload(rec, capture, first_module),
        "flags": assemble.flags_payload(records),
        "summary": {"final_vs_hf": assemble.final_summary(traced, ref, layers),
                    "compiled_vs_eager": assemble.compiled_summary(checks),
                    "flow": assemble.flow_payload(records), "hf_lines": hf_lines},
    }
    if req.experiment is not None:
        payload["experiment"] = req.experiment
    if hooks is not None:
        hooks.extend(payload, tensors, rec, rt, ref, ranks)
    interrupted()
    with progress.step("write", f"writing {out}"):
        payload["meta"]["timings"] = dict(progress.timings)
        store.write_trace(out, payload, tensors if save else None, req.force or req.if_stale)
    return TraceResult(out, False, payload, dict(progress.timings))


def _meta(opts: TraceOptions, rt: runtime.Runtime, rec: Recorder, ref: Any,
          key: dict[str, Any], compiled: dict[str, int], while_recording: dict[str, int], same: bool,
          saved: bool, timings: dict[str, float]) -> dict[str, Any]:
    """Provenance and run facts for `meta`."""
    return {
        "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "command": provenance.command_line(),
        "device": rt.device.type, "device_name": provenance.device_name(rt.device),
        "dtype": str(rt.dtype).removeprefix("torch."),
        "model": {"kind": "checkpoint" if opts.model else "preset", "name": rt.model_label,
                  "layers": int(rt.config["num_hidden_layers"]), "config": rt.config,
                  "loader_warnings": rt.loader_warnings},
        "seed": opts.seed,
        "input": {"tokens": int(rt.input_ids.numel()), "source": rt.input_source, "ids": rt.input_ids.tolist(),
                  **({"text": rt.input_text} if rt.input_text is not None else {})},
        "attention": rt.attention,
        "triton_interpret": os.environ.get("TRITON_INTERPRET"),
        "versions": provenance.versions(),
        "compiled": {"ran_compiled": rec.ran_compiled(), "compiled_calls": dict(rec.compiled_calls),
                     "eager_escapes": dict(rec.escapes), "graph_count_trusted": rec.graph_count_trusted(),
                     "dynamo_first_run": compiled,
                     "dynamo_while_recording": while_recording,
                     "recording_changed_output": not same},
        "reference": {"implementation": f"transformers Qwen3ForCausalLM ({ref.attn_implementation} attention)",
                      "transformers": ref.transformers_version, "tolerance_rel_l2": TOLERANCE, "margin": MARGIN, "rule": RULE},
        "recorder": {"line_events": rec.backend, "compiled": native.STATE.active,
                     "copies_taken": rec.copies.taken, "copies_reused": rec.copies.reused,
                     "views_of_copies": rec.copies.derived},
        "tensors_saved": saved,
        "inputs_key": key,
        "timings": dict(timings),
    }
