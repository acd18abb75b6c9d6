"""One `annotate trace` run: build → compile → record → reference → identify → write.

The CLI only parses arguments and shows progress; every step lives here, and each is timed
into the `Progress` it is given (the trace stores the breakdown too).
"""
from __future__ import annotations

import dataclasses
import datetime as dt
import json
import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch

from annotate import guard, interrupts
from annotate.errors import UserError
from annotate.progress import Progress
from annotate.project import Project
from annotate.trace import assemble, internals, kernels, provenance, runtime, sourcemap, store
from annotate.trace.options import PRESETS, TRACE_DEFAULTS, TraceOptions, check_options, default_tokens
from annotate.trace.recorder import Recorder
from annotate.trace.hf_lines import nano_index, summary as hf_summary
from annotate.vendoring.sources import sha256_file
from annotate.trace.reference import MARGIN, TOLERANCE, Identifier, run_reference

@dataclass
class TraceRequest:
    """Parsed command line of `annotate trace`."""

    options: TraceOptions
    out: Path | None = None
    force: bool = False
    full_tensors: bool = False
    if_stale: bool = False
    experiment: dict[str, Any] | None = None  # an experiment's edits, stored in the trace (annotate/experiments.py)


@dataclass
class RankHooks:
    """What a --tp run adds to rank 0's pipeline (`annotate.trace.parallel` fills it in; this module
    knows nothing of processes): ``gathered`` runs right after the recorded prefill (the other ranks
    wait for it: their records arrive, the group closes); ``extend`` adds the per-rank payload before
    the write (payload, tensors, rank 0's recorder, the runtime, the peer, the other ranks' records)."""

    gathered: Callable[[], Any]
    extend: Callable[[dict[str, Any], dict[str, torch.Tensor], Recorder, runtime.Runtime, Any, Any], None]


@dataclass
class TraceResult:
    """What the CLI reports."""

    out: Path
    skipped: bool
    payload: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)


def effective_layers(opts: TraceOptions) -> int | None:
    """--layers, or the preset's default depth for traces (the whole checkpoint for --model)."""
    if opts.layers is not None or opts.model is not None:
        return opts.layers
    preset = PRESETS.get(opts.preset)
    return preset.default_layers if preset is not None else None


def default_out(opts: TraceOptions, root: Path) -> Path:
    """`traces/<device>` for the default trace; otherwise `traces/<device>-<dtype>-<model>-<N>L-<T>T`."""
    tokens = opts.tokens or default_tokens(opts)
    base, default = root / Project.TRACES_DIR, TRACE_DEFAULTS
    plain = (opts.model is None and opts.preset == default.preset and opts.dtype == default.dtype
             and opts.prompt is None and opts.layers in (None, effective_layers(default))
             and tokens == default_tokens(opts))
    suffix = f"-tp{opts.tp}" if opts.tp > 1 else ""
    if plain:
        return base / f"{opts.device}{suffix}"
    name = opts.model.name if opts.model is not None else opts.preset
    layers = effective_layers(opts)
    if layers is None and opts.model is not None:
        try:
            layers = int(json.loads((opts.model / "config.json").read_text(encoding="utf-8"))["num_hidden_layers"])
        except (OSError, ValueError, KeyError, TypeError):
            layers = None  # validated (with a proper message) when the run starts
    length = "prompt" if opts.prompt is not None else f"{tokens}T"
    return base / f"{opts.device}-{opts.dtype}-{name}-{layers if layers else 'all'}L-{length}{suffix}"


def inputs_key(req: TraceRequest, facts: dict[str, Any]) -> dict[str, Any]:
    """Everything that determines a trace's content: equal keys → --if-stale may skip.

    ``facts`` are the vendor facts (pin + local file hashes) read once at the start of the run,
    so the key and the trace's ``vendor`` block describe the same bytes.
    """
    o = req.options
    model_cfg = None
    if o.model is not None and (o.model / "config.json").is_file():
        model_cfg = sha256_file(o.model / "config.json")
    return {"preset": o.preset if o.model is None else None, "model": str(o.model) if o.model else None,
            "model_config_sha256": model_cfg, "layers": effective_layers(o), "tokens": o.tokens, "prompt": o.prompt,
            "dtype": o.dtype, "device": o.device, "seed": o.seed, "full_tensors": req.full_tensors,
            "vendor_files": hashlib.sha256(repr(sorted(facts["files"].items())).encode()).hexdigest(),
            "tool": provenance.tool_hash(), "torch": torch.__version__, "format": store.VERSION,
            **({"tp": o.tp} if o.tp > 1 else {})}


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
    rec = Recorder(rt.model, mods, runtime.traced_root(opts), parallel=opts.tp > 1)
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
        records, tensors = assemble.records_payload(rec, Identifier(ref), save)
        math = assemble.math_payload(ref, records, save, tensors)
        checks = assemble.checks_payload(rec)
    with progress.step("hf lines", "HF transformers' own lines under the same recorder (eager, CPU)"):
        # after identify: each HF row is measured against the nano-vllm tensor identified as its math variable
        hf_lines = hf_summary(root, rt.checkpoint, layers, rt.dtype, rt.input_ids, ref, nano_index(records, rec.records))
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
        "input": {"tokens": int(rt.input_ids.numel()), "source": rt.input_source, "ids": rt.input_ids.tolist()},
        "attention": rt.attention,
        "triton_interpret": os.environ.get("TRITON_INTERPRET"),
        "versions": provenance.versions(),
        "compiled": {"ran_compiled": rec.ran_compiled(), "compiled_calls": dict(rec.compiled_calls),
                     "eager_escapes": dict(rec.escapes), "graph_count_trusted": rec.graph_count_trusted(),
                     "dynamo_first_run": compiled,
                     "dynamo_while_recording": while_recording,
                     "recording_changed_output": not same},
        "reference": {"implementation": f"transformers Qwen3ForCausalLM ({ref.attn_implementation} attention)",
                      "transformers": ref.transformers_version, "tolerance_rel_l2": TOLERANCE, "margin": MARGIN},
        "recorder": {"copies_taken": rec.copies.taken, "copies_reused": rec.copies.reused,
                     "views_of_copies": rec.copies.derived},
        "tensors_saved": saved,
        "inputs_key": key,
        "timings": dict(timings),
    }
