"""Instrumented traces of nano-vllm's real (compiled) Qwen3 path.

Modules, lowest first, each with one job:

* `options`    what a run asks for: the one home of its defaults, choices and value checks (torch-free)
* `numerics`   distances (max |Δ|, ulps) and summaries of tensors
* `shims`      flash_attn stand-in on SDPA, installed only when flash_attn is missing
* `kernels`    capture of the code Inductor generates (C++ on CPU, Triton on GPU)
* `runtime`    process group, presets, random HF-layout checkpoints, the vendored model, prefill context
* `sourcemap`  per traced line, its statement of the one model (`annotate.source`) and its bytecode effect
* `recorder`   line recorder, eager replay of compiled bodies, compiled-ran-compiled check
* `monitor`    line events from sys.monitoring (PEP 669, Python 3.12+) for the watched code objects only
* `reference`  HF transformers peer, math variables, identification by comparison
* `provenance` vendor pin and hashes, versions, device
* `assemble`   raw recording → trace payload (summaries, identities, flags, summary tables)
* `store`      the trace format: atomic write, validated load, query API for the site
* `pipeline`   one `annotate trace` run; `report` its text report
* `bandwidth`  fused add_rms_forward vs eager vs device copy timing (GPU check)
* `native`     loads the mypyc build of the per-line modules when it matches their sources (`native_build`
  makes it); installed here, before any of them is imported

Nothing here imports pages, notes or the site; `sourcemap` reads the statement model below them
(`annotate.source`, which imports tree-sitter on first use).
"""
from __future__ import annotations

from annotate.trace import native as _native

_native.install()   # before any compiled module can be imported: a stale build never loads
