"""What a trace of a checkpoint needs, from its config.json alone: device memory and disk.

Computed before any weight is read, so `annotate trace --device cuda` can refuse a run that will not
fit (one line: what is needed, what is free, what to pass instead) rather than fail deep in a load.

- weights: every tensor the run builds (:func:`annotate.trace.weight_shapes.expected_weights`, the same
  list the checkpoint check uses), in the run's dtype — twice on the device: nano-vllm's model and
  HF transformers' reference, which the trace compares it with;
- activations: the tensors live at once inside one decoder layer for the whole prompt (x, residual,
  q/k/v, attention output, gate and up, the activation; RMSNorm's float32 copies) plus the attention
  scores, counted as if materialised (the upper bound: SDPA's math path on CPU does);
- recorded: the recorder's copies, which stay on the device — ``units`` hidden-sized vectors per token
  and layer, *measured* from a recorded trace (:func:`recorded_units`) when one is at hand;
- disk: the checkpoint's *.safetensors and a trace with ``--full-tensors``.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from annotate.errors import UserError

GIB = 2**30


def element_bytes(dtype: str) -> int:
    """Bytes per element of a --dtype choice (one of options.DTYPE_NAMES, each the name of a torch dtype),
    as torch says."""
    import torch

    return int(getattr(torch, dtype).itemsize)


@dataclass(frozen=True)
class Budget:
    """Bytes one trace needs; ``recorded`` is None when no trace measured the recorder's share."""

    weights: int
    activations: int
    recorded: int | None
    checkpoint_disk: int
    trace_disk: int | None

    @property
    def device_memory(self) -> int:
        """Both models' weights, the activations and the recorder's copies (0 when not measured)."""
        return 2 * self.weights + self.activations + (self.recorded or 0)


def parameter_count(config: dict[str, Any], layers: int) -> int:
    from annotate.trace.weight_shapes import expected_weights

    total = 0
    for shape in expected_weights(config, layers).values():
        n = 1
        for d in shape:
            n *= d
        total += n
    return total


def activation_bytes(config: dict[str, Any], tokens: int, dtype: str) -> int:
    """Peak working set of one decoder layer over ``tokens`` tokens (see the module docstring)."""
    hidden, inter = config["hidden_size"], config["intermediate_size"]
    heads, kv = config["num_attention_heads"], config["num_key_value_heads"]
    head_dim = config.get("head_dim") or hidden // heads
    per_token = element_bytes(dtype) * (2 * hidden + (heads + 2 * kv) * head_dim + heads * head_dim + 3 * inter)
    per_token += 4 * 2 * hidden  # RMSNorm's float32 copies of x
    scores = 4 * heads * tokens * tokens
    return tokens * per_token + scores


def recorded_units(payload: dict[str, Any]) -> float | None:
    """Hidden-sized vectors the recorder kept per token and layer in a recorded trace (distinct copies);
    None when the trace has no layers or no tensor keys."""
    meta = payload["meta"]
    layers, tokens, hidden = meta["model"]["layers"], meta["input"]["tokens"], meta["model"]["config"]["hidden_size"]
    seen: dict[str, int] = {}
    for record in payload["records"]:
        for var in record["vars"]:
            if var.get("tensor") and isinstance(var.get("shape"), list):
                n = 1
                for d in var["shape"]:
                    n *= int(d)
                seen[var["tensor"]] = n
    if not seen or not layers or not tokens:
        return None
    return sum(seen.values()) / (layers * tokens * hidden)


def measured_units(root: Path) -> float | None:
    """:func:`recorded_units` of the default trace (``annotate trace``'s output) when it is recorded, else None."""
    from annotate.trace.options import TRACE_DEFAULTS
    from annotate.trace.freshness import default_out
    from annotate.trace.store import read_plain_payload

    folder = default_out(TRACE_DEFAULTS, root)
    return recorded_units(read_plain_payload(folder)) if (folder / "trace.json").is_file() else None


def estimate(config: dict[str, Any], layers: int, tokens: int, dtype: str, units: float | None = None,
             checkpoint_disk: int | None = None) -> Budget:
    """The budget of tracing ``layers`` layers of ``config`` over ``tokens`` tokens in ``dtype``."""
    size = element_bytes(dtype)
    weights = parameter_count(config, layers) * size
    recorded = None if units is None else int(units * layers * tokens * config["hidden_size"] * size)
    disk = checkpoint_disk if checkpoint_disk is not None else parameter_count(config, config["num_hidden_layers"]) * 2
    return Budget(weights, activation_bytes(config, tokens, dtype), recorded, disk, recorded)


def check_fits(budget: Budget, free: int, device: str, label: str, dtype: str) -> None:
    """Refuse (one line) when the run needs more device memory than ``free``: before any weight is loaded."""
    if budget.device_memory <= free:
        return
    recorded = "" if budget.recorded is None else f" + recorded copies {gib(budget.recorded)}"
    smaller = ", or --dtype bfloat16" if element_bytes(dtype) > 2 else ""
    raise UserError(f"{label}: needs about {gib(budget.device_memory)} of device memory (weights {gib(budget.weights)} × 2 "
                    f"for nano-vllm and the HF reference + activations {gib(budget.activations)}{recorded}) but {device} "
                    f"has {gib(free)} free; pass fewer --layers or --tokens{smaller} (nothing was loaded)")


def gib(n: int | float) -> str:
    return f"{n / GIB:.2f} GiB"
