"""HF transformers' own lines traced: the same line recorder on HF's Qwen3 (eager), identified by comparison.

The recorder (:class:`annotate.trace.recorder.Recorder`) traces ``Qwen3Model.forward``,
``Qwen3DecoderLayer.forward``, ``Qwen3MLP.forward`` and ``Qwen3RMSNorm.forward`` of the *installed*
transformers, which must be byte-for-byte the vendored pin (``vendor/transformers.lock.json``
records its sha256): otherwise the lines recorded would not be the lines the site shows. Every
recorded ``hidden_states`` / ``residual`` is then compared with the peer's math variables (x, x₁,
x₂, …) exactly as nano-vllm's are — nothing is assumed from line numbers.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from annotate.errors import UserError
from annotate.trace.internals import innermost_callable
from annotate.trace.recorder import LIVE, Recorder
from annotate.trace.reference import Identifier, Identity, PeerRun
from annotate.vendoring.lock import read_lock, upstream_lock
from annotate.vendoring.sources import sha256_file

HF_FILE = "transformers/models/qwen3/modeling_qwen3.py"
HF_LOCK = upstream_lock("transformers")
TRACED = ("Qwen3Model.forward", "Qwen3DecoderLayer.forward", "Qwen3MLP.forward", "Qwen3RMSNorm.forward")


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
              peer: PeerRun) -> list[dict[str, Any]]:
    """Run HF's Qwen3 (eager) under the line recorder on one prefill; identify each live variable, once per
    (line, layer, module, variable) — the rows of ``summary.hf_lines`` (``max_abs`` None and ``max_ulps``
    -1 when nothing matched, as the format has them).

    `base` is the site-packages folder of the installed transformers, already checked by `installed_file`."""
    import transformers
    from transformers import Qwen3ForCausalLM
    from transformers.models.qwen3 import modeling_qwen3 as hf

    transformers.logging.set_verbosity_error()
    model = Qwen3ForCausalLM.from_pretrained(str(checkpoint), torch_dtype=dtype, num_hidden_layers=layers,
                                             attn_implementation="eager").eval()
    # HF decorates forwards (``check_model_inputs``, ``deprecate_kwarg``): trace the function that holds the lines
    traced = {}
    for qual in TRACED:
        cls, attr = qual.split(".")
        traced[qual] = innermost_callable(getattr(getattr(hf, cls), attr))
    rec = Recorder(model, {}, base, traced=traced)
    with torch.inference_mode(), rec.recording():
        ids = input_ids.cpu()[None]
        model.model(input_ids=ids, position_ids=torch.arange(ids.shape[1])[None], use_cache=False)
    ident = Identifier(peer)
    seen, out = set(), []
    for r in rec.records:
        if r.file != HF_FILE or r.kind != "line":
            continue
        for v in r.vars:
            key = (r.line, r.layer, r.module, v.name)
            if v.name not in (*LIVE, "inputs_embeds", "down_proj") or v.role == "argument" or key in seen:
                continue
            seen.add(key)
            found = ident.identify(v.tensor[0] if v.tensor.dim() == 3 else v.tensor)
            out.append({"line": r.line, "function": r.function, "module": r.module, "layer": r.layer, "var": v.name,
                        **hf_identity(found)})
    return out


def hf_identity(found: Identity) -> dict[str, Any]:
    """One HF row's identity fields: the ≡ (`identity`, `label`, distance; empty unless status "match"), the
    status, the margin it was claimed with and the runner-up, and the candidates of an ambiguous one."""
    best = found.matches[0] if found.status == "match" else None
    runner = found.runner_up
    return {"identity": best.key if best else "", "label": best.label if best else "",
            "max_abs": best.max_abs if best else None, "max_ulps": best.max_ulps if best else -1,
            "status": found.status, "margin": found.margin, "required": found.required,
            "runner_up": {"label": runner.label, "rel": runner.rel} if runner else None,
            "rel": best.rel if best else None,
            "ambiguous": [m.label for m in found.matches] if found.status == "ambiguous" else []}


def summary(root: Path, checkpoint: Path, layers: int, dtype: torch.dtype, input_ids: torch.Tensor,
            peer: PeerRun) -> dict[str, Any]:
    """The trace's ``summary.hf_lines``: each HF (line, layer, module, variable) once, with its identity —
    or why HF's lines were not traced (an installed transformers other than the pin, e.g. on the GPU image)."""
    try:
        base, sha = installed_file(root)
        lines = record_hf(base, checkpoint, layers, dtype, input_ids, peer)
    except UserError as exc:
        return {"file": HF_FILE, "skipped": str(exc), "lines": []}
    import transformers

    return {"file": HF_FILE, "skipped": "", "sha256": sha, "transformers": transformers.__version__,
            "attention": "eager", "lines": lines}
