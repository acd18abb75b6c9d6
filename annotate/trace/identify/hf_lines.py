"""HF transformers' own lines traced: the same line recorder on HF's Qwen3 (eager), identified by comparison.

The recorder (:class:`annotate.trace.record.recorder.Recorder`) traces ``Qwen3Model.forward``,
``Qwen3DecoderLayer.forward``, ``Qwen3MLP.forward`` and ``Qwen3RMSNorm.forward`` of the *installed*
transformers, which must be byte-for-byte the vendored pin (``vendor/transformers.lock.json``
records its sha256): otherwise the lines recorded would not be the lines the site shows. Every
recorded ``hidden_states`` / ``residual`` is then compared with the peer's math variables (x, x₁,
x₂, …) exactly as nano-vllm's are — nothing is assumed from line numbers.

Each row also keeps what the page shows of the tensor (shape, dtype, ‖·‖, first values) and, when it
matched, the nano-vllm line whose tensor was identified as the same math variable of the same layer,
with the measured distance between the two tensors (``nano``): HF's value against nano-vllm's, which
teaches how far the two implementations drift, where HF against its own hooks would be 0 by design.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import torch

from annotate.errors import UserError
from annotate.trace.model.internals import innermost_callable
from annotate.trace.model.numerics import distance, summarize
from annotate.trace.record.recorder import LIVE, Recorder
from annotate.trace.identify.reference import Identifier, Identity, PeerRun
from annotate.trace.format.store import FLOW_FUNCTIONS, FLOW_NAMES
from annotate.vendoring.lock import read_lock, upstream_lock
from annotate.vendoring.sources import sha256_file

HF_FILE = "transformers/models/qwen3/modeling_qwen3.py"
HF_LOCK = upstream_lock("transformers")
TRACED = ("Qwen3Model.forward", "Qwen3DecoderLayer.forward", "Qwen3MLP.forward", "Qwen3RMSNorm.forward")


@dataclass(frozen=True)
class NanoValue:
    """A nano-vllm tensor identified as one math variable: where it was recorded, and the tensor itself."""

    file: str
    line: int
    var: str
    layer: int | None
    assigned: bool
    flow: bool          # one of the lesson's two variables in the decoder layer's own lines (store.FLOW_*)
    tensor: torch.Tensor


#: (math variable key, its layer) -> the nano-vllm tensors identified as it, in the order they ran
NanoIndex = dict[tuple[str, int], list[NanoValue]]


def nano_index(records: list[dict[str, Any]], raws: Iterable[Any]) -> NanoIndex:
    """Index nano-vllm's identified tensors (`records`: the trace's record payloads; `raws`: the recorder's
    records they were made from, same order, holding the tensors) by every math variable each matched."""
    index: NanoIndex = {}
    for rec, raw in zip(records, raws):
        if rec["kind"] != "line" or rec["file"] == HF_FILE:
            continue
        for var, held in zip(rec["vars"], raw.vars):
            if var["identity"].get("status") != "match" or var["name"].startswith("return"):
                continue
            flow = rec["function"] in FLOW_FUNCTIONS and var["name"] in FLOW_NAMES
            value = NanoValue(rec["file"], rec["line"], var["name"], rec["layer"], var["role"] == "assigned", flow,
                              held.tensor)
            for m in var["identity"]["matches"]:
                index.setdefault((m["key"], m["layer"]), []).append(value)
    return index


def nano_peer(found: Identity, tensor: torch.Tensor, index: NanoIndex) -> dict[str, Any] | None:
    """The nano-vllm line matching an HF row (both identified as the same math variable of the same layer)
    and the measured distance between the two tensors; None when the row matched nothing or nano-vllm
    holds no tensor identified as it. Of several, the lesson's own: `hidden_states` / `residual` in the
    decoder's lines (qwen3.py:156 `residual` for x₁, not the fp32 sum inside add_rms_forward), the line
    that assigned it before one that merely held it, then the first that ran."""
    if found.status != "match":
        return None
    hits = [v for m in found.matches for v in index.get((m.key, m.layer), []) if v.tensor.shape == tensor.shape]
    if not hits:
        return None
    best = min(hits, key=lambda v: (not v.flow, not v.assigned))   # min keeps the first of equals: run order
    d = distance(tensor, best.tensor)
    return {"file": best.file, "line": best.line, "var": best.var, "layer": best.layer, "max_abs": d.max_abs,
            "max_ulps": d.max_ulps, "scale_ulps": d.scale_ulps, "rel": d.rel, "dtype": d.dtype}


def tensor_fields(t: torch.Tensor) -> dict[str, Any]:
    """What a values panel shows of an HF tensor (the same fields as a nano-vllm variable's)."""
    s = summarize(t)
    return {"shape": list(s.shape), "dtype": s.dtype, "norm": s.norm, "mean": s.mean, "absmax": s.absmax,
            "head": list(s.head)}


def installed_file(root: Path) -> tuple[Path, str]:
    """(site-packages folder, the pinned sha256 of HF's file); refuses an installed copy that is not the pin."""
    import transformers

    lock = read_lock(root / HF_LOCK)
    base = Path(transformers.__file__).resolve().parent.parent
    path = base / HF_FILE
    pinned = lock.source.files.get(HF_FILE)
    if pinned is None or not path.is_file() or sha256_file(path) != pinned:
        want, have = lock.source.version, transformers.__version__
        what = (f"the installed transformers=={have} has other bytes than the vendored pin ({HF_LOCK}); reinstall it"
                if have == want else f"the installed transformers ({have}) is not the vendored pin ({HF_LOCK}); "
                f"install transformers=={want} as pinned")
        raise UserError(f"{path}: {what}")
    return base, pinned


def record_hf(base: Path, checkpoint: Path, layers: int, dtype: torch.dtype, input_ids: torch.Tensor,
              peer: PeerRun, nano: NanoIndex | None = None, ident: Identifier | None = None) -> list[dict[str, Any]]:
    """Run HF's Qwen3 (eager) under the line recorder on one prefill, on the device of `input_ids` (the trace's:
    its CPU twin on a GPU trace took 21 of 74 s at full depth); identify each live variable, once per
    (line, layer, module, variable) — the rows of ``summary.hf_lines`` (``max_abs`` None and ``max_ulps``
    -1 when nothing matched, as the format has them), with the tensor's summary and its distance to the
    matching nano-vllm tensor in `nano` (see :func:`nano_peer`).

    Every row is identified in one :meth:`~annotate.trace.identify.reference.Identifier.identify_many` call, by `ident`
    when given (the trace's own identifier: its candidate stacks are built once for both) else a new one.
    `base` is the site-packages folder of the installed transformers, already checked by `installed_file`."""
    import transformers
    from transformers import Qwen3ForCausalLM
    from transformers.models.qwen3 import modeling_qwen3 as hf

    transformers.logging.set_verbosity_error()
    device = input_ids.device
    model = Qwen3ForCausalLM.from_pretrained(str(checkpoint), torch_dtype=dtype, num_hidden_layers=layers,
                                             attn_implementation="eager").to(device).eval()
    # HF decorates forwards (``check_model_inputs``, ``deprecate_kwarg``): trace the function that holds the lines
    traced = {}
    for qual in TRACED:
        cls, attr = qual.split(".")
        traced[qual] = innermost_callable(getattr(getattr(hf, cls), attr))
    rec = Recorder(model, {}, base, traced=traced)
    with torch.inference_mode(), rec.recording():
        ids = input_ids[None]
        model.model(input_ids=ids, position_ids=torch.arange(ids.shape[1], device=device)[None], use_cache=False)
    rows = list(_live_rows(rec.records))
    found = (ident or Identifier(peer)).identify_many([tensor for _, _, tensor in rows])
    return [{"line": r.line, "function": r.function, "module": r.module, "layer": r.layer, "var": v.name,
             **hf_identity(f), **tensor_fields(tensor), "nano": nano_peer(f, tensor, nano or {})}
            for (r, v, tensor), f in zip(rows, found)]


def _live_rows(records: Iterable[Any]) -> Iterable[tuple[Any, Any, torch.Tensor]]:
    """(record, variable, tensor) of each live variable HF's lines assigned or held, once per (line, layer,
    module, variable), in the order they ran; the batch dimension of a 3-D tensor dropped."""
    seen = set()
    for r in records:
        if r.file != HF_FILE or r.kind != "line":
            continue
        for v in r.vars:
            key = (r.line, r.layer, r.module, v.name)
            if v.name not in (*LIVE, "inputs_embeds", "down_proj") or v.role == "argument" or key in seen:
                continue
            seen.add(key)
            yield r, v, (v.tensor[0] if v.tensor.dim() == 3 else v.tensor)


def hf_identity(found: Identity) -> dict[str, Any]:
    """One HF row's identity fields: the ≡ (`identity`, `label`, distance; empty unless status "match"), the
    status, the margin it was claimed with and the runner-up, and the candidates of an ambiguous one."""
    best = found.matches[0] if found.status == "match" else None
    runner = found.runner_up
    return {"identity": best.key if best else "", "label": best.label if best else "",
            "match_layer": best.layer if best else None,
            "max_abs": best.max_abs if best else None, "max_ulps": best.max_ulps if best else -1,
            "status": found.status, "margin": found.margin, "required": found.required,
            "runner_up": {"label": runner.label, "rel": runner.rel} if runner else None,
            "rel": best.rel if best else None,
            "ambiguous": [m.label for m in found.matches] if found.status == "ambiguous" else []}


def summary(root: Path, checkpoint: Path, layers: int, dtype: torch.dtype, input_ids: torch.Tensor,
            peer: PeerRun, nano: NanoIndex | None = None, ident: Identifier | None = None) -> dict[str, Any]:
    """The trace's ``summary.hf_lines``: each HF (line, layer, module, variable) once, with its identity —
    or why HF's lines were not traced (an installed transformers other than the pin, e.g. on the GPU image).
    HF runs on the device of `input_ids`; `ident`: see :func:`record_hf`."""
    try:
        base, sha = installed_file(root)
        lines = record_hf(base, checkpoint, layers, dtype, input_ids, peer, nano, ident)
    except UserError as exc:
        return {"file": HF_FILE, "skipped": str(exc), "lines": []}
    import transformers

    return {"file": HF_FILE, "skipped": "", "sha256": sha, "transformers": transformers.__version__,
            "attention": "eager", "lines": lines}
