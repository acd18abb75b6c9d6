"""Instrumented traces of nano-vllm's real (compiled) Qwen3 path, one subpackage a stage of the data.

Stages, lowest first; each imports only itself and the stages before it (tests/test_import_graph.py):

* `format`    the trace format every stage may use: its one model (schema), validation, the tensors file,
  atomic write and validated load (store), today's lines (placement), provenance
* `model`     the model and its run: options (the one home of a run's defaults, choices and value checks;
  torch-free), checkpoint shapes and the memory budget, the tokenizer, shims, torch's private names
  (internals), compile graphs, captured kernels, and the runtime that builds and runs the vendored model
* `record`    the line recorder, its line events (monitor), copies, aliasing, object keys (identity), the
  statements of each traced line (sourcemap), and the mypyc build of these per-line modules (native)
* `identify`  identification by comparison against HF transformers (reference), a --tp run's shards, HF's
  own traced lines, vLLM's native kernels
* `reports`   the text report of `annotate trace`, the fused-kernel bandwidth check

Above the stages, the modules that join them: `assemble` (a recording → the trace payload),
`pipeline` (one `annotate trace` run), `parallel` (its --tp ranks) and `freshness` (--if-stale, torch-free).
`record.native` is installed here, before any compiled module can be imported: a stale build never loads.
Nothing here imports pages, notes or the site.
"""
from __future__ import annotations

from annotate.trace.record import native as _native

_native.install()   # before any compiled module can be imported: a stale build never loads
