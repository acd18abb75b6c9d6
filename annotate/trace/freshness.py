"""Whether a trace is up to date, decided without importing torch: what `--if-stale` needs.

A trace's content is determined by its request (options, ``--full-tensors``), the vendored bytes,
the tool (``annotate/trace/**/*.py``), torch's version and the format: :func:`inputs_key`, which the
pipeline stores in ``meta.inputs_key``. Every piece of it is read here without torch (torch's version
from its installed metadata), so `make site` with nothing changed decides "fresh" for every trace and
experiment without importing torch (which takes longer than the whole check; bench/bench_site.py
measures both).
"""
from __future__ import annotations

import hashlib
import importlib.metadata
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from annotate.project import Project
from annotate.trace.format import provenance, store
from annotate.trace.model.options import (PRESETS, TRACE_DEFAULTS, TraceOptions, check_options, default_tokens,
                                    effective_prompt, uses_qwen3_tokenizer)
from annotate.trace.model.qwen3_tokenizer import qwen3_tokenizer_sha256
from annotate.vendoring.sources import sha256_file


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
class TraceResult:
    """What the CLI reports (``skipped``: --if-stale found the trace up to date)."""

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


def torch_version() -> str:
    """The installed torch's version, from its metadata (equal to ``torch.__version__``, without the import)."""
    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:   # a torch not installed as a distribution: ask it
        import torch

        return str(torch.__version__)


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
            "model_config_sha256": model_cfg, "layers": effective_layers(o), "tokens": o.tokens, "prompt": effective_prompt(o),
            "dtype": o.dtype, "device": o.device, "seed": o.seed, "full_tensors": req.full_tensors,
            "vendor_files": hashlib.sha256(repr(sorted(facts["files"].items())).encode()).hexdigest(),
            "tool": provenance.tool_hash(), "torch": torch_version(), "format": store.VERSION,
            **({"tp": o.tp} if o.tp > 1 else {}),
            **({"tokenizer": qwen3_tokenizer_sha256(o.root)} if uses_qwen3_tokenizer(o) else {})}


def up_to_date(req: TraceRequest) -> Path | None:
    """The trace folder `req` would write when it already holds a trace of the same inputs (the
    pipeline's own check, :func:`store.payload_matches`, read without torch); else None, and the
    pipeline decides (and says why it regenerates) under its output lock."""
    check_options(req.options)
    out = req.out or default_out(req.options, req.options.root)
    if not (out / store.JSON_NAME).is_file():
        return None
    facts = provenance.vendor_facts(req.options.root, req.options.vendored)
    return out if store.payload_matches(out, inputs_key(req, facts)) is None else None
