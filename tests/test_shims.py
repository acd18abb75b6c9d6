"""annotate.trace.model.shims: the SDPA stand-in matches attention math and is installed only when needed."""
from __future__ import annotations

import importlib.util
import sys
import types

import pytest
import torch

from annotate.trace.model import shims


def naive(q, k, v, scale, causal):
    """Textbook attention for one sequence (Lq, Hq, D) with GQA by repetition, bottom-right causal."""
    rep = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
    s = torch.einsum("qhd,khd->hqk", q.double(), k.double()) * scale
    if causal:
        lq, lk = q.shape[0], k.shape[0]
        mask = torch.arange(lk)[None, :] <= torch.arange(lq)[:, None] + (lk - lq)
        s = s.masked_fill(~mask, float("-inf"))
    return torch.einsum("hqk,khd->qhd", s.softmax(-1), v.double()).float()


def test_varlen_matches_textbook_attention_with_gqa() -> None:
    g = torch.Generator().manual_seed(0)
    lens = [3, 5]
    q = torch.randn(8, 4, 16, generator=g)
    k = torch.randn(8, 2, 16, generator=g)
    v = torch.randn(8, 2, 16, generator=g)
    cu = torch.tensor([0, 3, 8], dtype=torch.int32)
    out = shims.flash_attn_varlen_func(q, k, v, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=5,
                                       max_seqlen_k=5, softmax_scale=0.25, causal=True)
    want = torch.cat([naive(q[0:3], k[0:3], v[0:3], 0.25, True), naive(q[3:8], k[3:8], v[3:8], 0.25, True)])
    assert out.shape == q.shape
    torch.testing.assert_close(out, want, atol=1e-5, rtol=1e-5)
    assert sum(lens) == 8


def test_causal_mask_is_bottom_right_aligned_and_paged_cache_gathers() -> None:
    g = torch.Generator().manual_seed(1)
    q = torch.randn(2, 2, 8, generator=g)
    k = torch.randn(6, 2, 8, generator=g)
    v = torch.randn(6, 2, 8, generator=g)
    cache_k = torch.zeros(4, 4, 2, 8)
    cache_v = torch.zeros(4, 4, 2, 8)
    table = torch.tensor([[2, 0]], dtype=torch.int32)  # the sequence lives in blocks 2 then 0
    cache_k[2], cache_k[0, :2] = k[:4], k[4:]
    cache_v[2], cache_v[0, :2] = v[:4], v[4:]
    out = shims.flash_attn_varlen_func(q, cache_k, cache_v, cu_seqlens_q=torch.tensor([0, 2]),
                                       cu_seqlens_k=torch.tensor([0, 6]), max_seqlen_q=2, max_seqlen_k=6,
                                       softmax_scale=0.5, causal=True, block_table=table)
    torch.testing.assert_close(out, naive(q, k, v, 0.5, True), atol=1e-5, rtol=1e-5)


def test_decode_with_kvcache_is_the_last_row_of_full_attention() -> None:
    g = torch.Generator().manual_seed(2)
    k = torch.randn(5, 2, 8, generator=g)
    v = torch.randn(5, 2, 8, generator=g)
    q = torch.randn(5, 4, 8, generator=g)
    cache_k = torch.zeros(2, 4, 2, 8)
    cache_v = torch.zeros(2, 4, 2, 8)
    cache_k.view(-1, 2, 8)[:5], cache_v.view(-1, 2, 8)[:5] = k, v
    out = shims.flash_attn_with_kvcache(q[4:5].unsqueeze(1), cache_k, cache_v, cache_seqlens=torch.tensor([5]),
                                        block_table=torch.tensor([[0, 1]]), softmax_scale=0.3, causal=True)
    torch.testing.assert_close(out[:, 0], naive(q, k, v, 0.3, True)[4:5], atol=1e-5, rtol=1e-5)


def test_unsupported_options_are_refused() -> None:
    x = torch.zeros(2, 1, 4)
    cu = torch.tensor([0, 2])
    with pytest.raises(NotImplementedError, match="dropout_p"):
        shims.flash_attn_varlen_func(x, x, x, cu, cu, 2, 2, dropout_p=0.1)


def test_installed_only_when_flash_attn_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    real = types.ModuleType("flash_attn")
    real.__version__ = "2.8.3"
    monkeypatch.setitem(sys.modules, "flash_attn", real)
    assert shims.install_flash_attn() == "flash_attn 2.8.3"
    assert sys.modules["flash_attn"] is real and not shims.attention_backend().startswith(shims.SHIM_NAME)

    monkeypatch.delitem(sys.modules, "flash_attn")
    monkeypatch.setattr(shims.importlib, "import_module", _raise_import_error)
    backend = shims.install_flash_attn()
    assert shims.attention_backend().startswith(shims.SHIM_NAME) and backend.startswith(shims.SHIM_NAME)
    assert importlib.util.find_spec("flash_attn") is not None  # transformers' availability probe must not crash
    from flash_attn import flash_attn_varlen_func  # what nano-vllm's attention.py does

    assert flash_attn_varlen_func is shims.flash_attn_varlen_func


def _raise_import_error(name: str):
    raise ImportError(f"No module named {name!r}")
