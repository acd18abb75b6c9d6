"""HF transformers' own lines traced: the same line recorder on HF's Qwen3 (eager), identified by comparison.

The recorder (:class:`annotate.trace.recorder.Recorder`) traces ``Qwen3Model.forward``,
``Qwen3DecoderLayer.forward``, ``Qwen3MLP.forward`` and ``Qwen3RMSNorm.forward`` of the *installed*
transformers, which must be byte-for-byte the vendored pin (``vendor/transformers.lock.json``
records its sha256): otherwise the lines recorded would not be the lines the site shows. Every
recorded ``hidden_states`` / ``residual`` is then compared with the peer's math variables (x, x₁,
x₂, …) exactly as nano-vllm's are — nothing is assumed from line numbers.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from annotate.errors import UserError
from annotate.trace.internals import innermost_callable
from annotate.trace.recorder import LIVE, Recorder
from annotate.trace.reference import Identifier, PeerRun
from annotate.vendoring.lock import read_lock, upstream_lock

HF_FILE = "transformers/models/qwen3/modeling_qwen3.py"
HF_LOCK = upstream_lock("transformers")
TRACED = ("Qwen3Model.forward", "Qwen3DecoderLayer.forward", "Qwen3MLP.forward", "Qwen3RMSNorm.forward")


@dataclass(frozen=True)
class HfLine:
    """What one HF variable held after one executed line, for one layer: its identity and distance."""

    line: int
    function: str
    module: str | None
    layer: int | None
    var: str
    identity: str        # the peer variable's key ("x1"), or "" when nothing matched
    label: str           # "x₁⁽2⁾"
    max_abs: float
    max_ulps: int


def installed_file(root: Path) -> tuple[Path, Path]:
    """(site-packages folder, installed modeling_qwen3.py); refuses a copy that is not the vendored pin."""
    import transformers

    base = Path(transformers.__file__).resolve().parent.parent
    path = base / HF_FILE
    pinned = read_lock(root / HF_LOCK).source.files.get(HF_FILE)
    got = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None
    if got is None or got != pinned:
        raise UserError(f"{path}: the installed transformers is not the vendored pin ({HF_LOCK}); "
                        f"install transformers=={transformers.__version__ if got else '4.57.6'} as pinned")
    return base, path


def record_hf(base: Path, checkpoint: Path, layers: int, dtype: torch.dtype, input_ids: torch.Tensor,
              peer: PeerRun) -> list[HfLine]:
    """Run HF's Qwen3 (eager) under the line recorder on one prefill; identify each live variable.

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
    out = []
    for r in rec.records:
        if r.file != HF_FILE or r.kind != "line":
            continue
        for v in r.vars:
            if v.name not in (*LIVE, "inputs_embeds", "down_proj") or v.role == "argument":
                continue
            tensor = v.tensor[0] if v.tensor.dim() == 3 else v.tensor
            found = ident.identify(tensor)
            best = found.matches[0] if found.matches else None
            out.append(HfLine(r.line, r.function, r.module, r.layer, v.name, best.key if best else "",
                              best.label if best else "", best.max_abs if best else float("nan"),
                              best.max_ulps if best else -1))
    return out


def summary(root: Path, checkpoint: Path, layers: int, dtype: torch.dtype, input_ids: torch.Tensor,
            peer: PeerRun) -> dict[str, Any]:
    """The trace's ``summary.hf_lines``: each HF (line, layer, module, variable) once, with its identity —
    or why HF's lines were not traced (an installed transformers other than the pin, e.g. on the GPU image)."""
    try:
        base, _ = installed_file(root)
        lines = record_hf(base, checkpoint, layers, dtype, input_ids, peer)
    except UserError as exc:
        return {"file": HF_FILE, "skipped": str(exc), "lines": []}
    import transformers

    sha = read_lock(root / HF_LOCK).source.files[HF_FILE]   # installed_file checked the installed file has it
    seen, out = set(), []
    for h in lines:
        key = (h.line, h.layer, h.module, h.var)
        if key not in seen:
            seen.add(key)
            out.append({"line": h.line, "function": h.function, "module": h.module, "layer": h.layer, "var": h.var,
                        "identity": h.identity, "label": h.label,
                        "max_abs": None if h.max_abs != h.max_abs else h.max_abs, "max_ulps": h.max_ulps})
    return {"file": HF_FILE, "skipped": "", "sha256": sha, "transformers": transformers.__version__,
            "attention": "eager", "lines": out}
