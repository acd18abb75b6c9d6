"""A `flash_attn` stand-in on `torch.nn.functional.scaled_dot_product_attention`.

nano-vllm's `attention.py` does `from flash_attn import flash_attn_varlen_func,
flash_attn_with_kvcache`. flash_attn is CUDA-only and has no wheel here, so when (and only when)
`import flash_attn` fails, a module with the same two functions and call signatures is put in
`sys.modules`. The backend that actually ran is reported by `attention_backend()` and ends up in the
trace metadata, so a reader always knows which attention produced the values.

The two functions run as opaque as the C extension they stand in for: a line tracer (the
recorder's) is set aside while they run, so their Python does not run traced (Python ≤ 3.11).
"""
from __future__ import annotations

import functools
import importlib
import importlib.machinery
import sys
import types
from typing import Any, Callable

import torch
import torch.nn.functional as F

SHIM_NAME = "sdpa-shim"
_MARK = "__annotate_shim__"


def _opaque(fn: Callable) -> Callable:
    """Run `fn` with any trace function set aside, as a C extension runs (from Python 3.12 on each
    `sys.settrace` re-instruments code, so there it is left as it is)."""
    if sys.version_info >= (3, 12):
        return fn

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        tracer = sys.gettrace()
        if tracer is None:
            return fn(*args, **kwargs)
        sys.settrace(None)
        try:
            return fn(*args, **kwargs)
        finally:
            sys.settrace(tracer)

    return call


def _unsupported(**options: object) -> None:
    """Refuse options the stand-in does not implement, rather than silently ignoring them."""
    bad = [k for k, v in options.items() if v]
    if bad:
        raise NotImplementedError(f"annotate's flash_attn stand-in does not support {', '.join(bad)}")


def _causal_mask(lq: int, lk: int, device: torch.device) -> torch.Tensor:
    """flash_attn's causal mask: aligned to the bottom-right corner when lq != lk."""
    i = torch.arange(lq, device=device)[:, None]
    j = torch.arange(lk, device=device)[None, :]
    return j <= i + (lk - lq)


def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float | None, causal: bool) -> torch.Tensor:
    """One sequence: q (Lq, Hq, D), k/v (Lk, Hkv, D) → (Lq, Hq, D); GQA by SDPA's enable_gqa."""
    mask = _causal_mask(q.shape[0], k.shape[0], q.device) if causal else None
    out = F.scaled_dot_product_attention(
        q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1),
        attn_mask=mask, scale=scale, enable_gqa=q.shape[1] != k.shape[1],
    )
    return out.transpose(0, 1)


def _paged(cache: torch.Tensor, blocks: torch.Tensor, length: int) -> torch.Tensor:
    """Gather one sequence's keys or values from a paged cache (num_blocks, block, H, D)."""
    return cache[blocks.long()].reshape(-1, *cache.shape[2:])[:length]


@_opaque
def flash_attn_varlen_func(
    q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p=0.0,
    softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
    deterministic=False, return_attn_probs=False, block_table=None,
):
    """Packed variable-length attention: sequence i is rows cu_seqlens[i]:cu_seqlens[i+1]."""
    _unsupported(dropout_p=dropout_p, window=tuple(window_size) != (-1, -1), softcap=softcap,
                 alibi_slopes=alibi_slopes is not None, return_attn_probs=return_attn_probs)
    cq, ck = cu_seqlens_q.tolist(), cu_seqlens_k.tolist()
    outs = []
    for i in range(len(cq) - 1):
        qi = q[cq[i]:cq[i + 1]]
        lk = ck[i + 1] - ck[i]
        if block_table is None:
            ki, vi = k[ck[i]:ck[i + 1]], v[ck[i]:ck[i + 1]]
        else:
            ki, vi = _paged(k, block_table[i], lk), _paged(v, block_table[i], lk)
        outs.append(_attend(qi, ki, vi, softmax_scale, causal))
    return torch.cat(outs, dim=0)


@_opaque
def flash_attn_with_kvcache(
    q, k_cache, v_cache, k=None, v=None, rotary_cos=None, rotary_sin=None, cache_seqlens=None,
    cache_batch_idx=None, cache_leftpad=None, block_table=None, softmax_scale=None, causal=False,
    window_size=(-1, -1), softcap=0.0, rotary_interleaved=True, alibi_slopes=None, num_splits=0,
    return_softmax_lse=False,
):
    """Decode against a (paged) KV cache: q (B, Lq, Hq, D) → (B, Lq, Hq, D)."""
    _unsupported(k=k is not None, v=v is not None, rotary=rotary_cos is not None,
                 cache_batch_idx=cache_batch_idx is not None, cache_leftpad=cache_leftpad is not None,
                 window=tuple(window_size) != (-1, -1), softcap=softcap,
                 alibi_slopes=alibi_slopes is not None, return_softmax_lse=return_softmax_lse)
    outs = []
    for b in range(q.shape[0]):
        length = int(cache_seqlens[b]) if cache_seqlens is not None else k_cache.shape[1]
        if block_table is None:
            kb, vb = k_cache[b, :length], v_cache[b, :length]
        else:
            kb, vb = _paged(k_cache, block_table[b], length), _paged(v_cache, block_table[b], length)
        outs.append(_attend(q[b], kb, vb, softmax_scale, causal))
    return torch.stack(outs, dim=0)


def _shim_module() -> types.ModuleType:
    """A module object exposing the two functions, marked as ours."""
    mod = types.ModuleType("flash_attn", "annotate: flash_attn stand-in on torch SDPA (see annotate.trace.model.shims)")
    for name, value in (("flash_attn_varlen_func", flash_attn_varlen_func),
                        ("flash_attn_with_kvcache", flash_attn_with_kvcache), ("__version__", "0+annotate.sdpa")):
        setattr(mod, name, value)
    # importlib.util.find_spec("flash_attn") (transformers asks it) must not fail on a spec-less module;
    # with no installed distribution behind it, transformers still reports flash_attn as unavailable
    mod.__spec__ = importlib.machinery.ModuleSpec("flash_attn", None, origin="annotate.trace.model.shims")
    setattr(mod, _MARK, True)
    return mod


def attention_backend() -> str:
    """Which attention nano-vllm will use: `flash_attn <version>` or `sdpa-shim (torch <version>)`."""
    mod = sys.modules.get("flash_attn")
    if mod is None:
        return "none (flash_attn not imported yet)"
    if getattr(mod, _MARK, False):
        return f"{SHIM_NAME} (torch {torch.__version__} scaled_dot_product_attention)"
    return f"flash_attn {getattr(mod, '__version__', '?')}"


def install_flash_attn() -> str:
    """Make `import flash_attn` work: the real one if importable, else the stand-in. Returns the backend."""
    if "flash_attn" not in sys.modules:
        try:
            importlib.import_module("flash_attn")
        except Exception:  # ImportError, or a broken CUDA build: either way the real one cannot run
            sys.modules.pop("flash_attn", None)
            sys.modules["flash_attn"] = _shim_module()
    return attention_backend()
