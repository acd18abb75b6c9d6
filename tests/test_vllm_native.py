"""vLLM's native fused add + RMSNorm (the vendored ir op, pure torch) on a real trace's recorded inputs:
it normalises the unrounded fp32 sum, bit for bit as nano-vllm does; HF's order (round, then normalise)
lands elsewhere in some elements."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from annotate.trace.identify.vllm_native import OPS_FILE, VENDOR, compare_trace, load_ops

REPO = Path(__file__).resolve().parents[1]
OPS = REPO / VENDOR / OPS_FILE


def _need_vllm() -> None:
    if not OPS.is_file():
        pytest.skip("vendor/vllm is not materialised; run `annotate vendor sync`")


def test_the_vendored_op_runs_without_vllm_installed() -> None:
    _need_vllm()
    ops = load_ops(OPS.read_bytes())
    assert "vllm" not in sys.modules and not any(m.startswith("_annotate_vendored_vllm") for m in sys.modules)
    x = torch.tensor([[1.0, 2.0, 3.0, 4.0]], dtype=torch.bfloat16)
    r = torch.tensor([[0.5, -1.0, 0.25, 2.0]], dtype=torch.bfloat16)
    out, residual = ops.fused_add_rms_norm(x, r, None, 1e-6)
    s = x.float() + r.float()
    assert torch.equal(residual, s.to(torch.bfloat16))
    assert torch.equal(out, (s * torch.rsqrt(s.pow(2).mean(-1, keepdim=True) + 1e-6)).to(torch.bfloat16))


def test_vllm_native_equals_nano_vllm_and_hf_order_differs(tiny_trace) -> None:
    _need_vllm()
    rows = compare_trace(OPS.read_bytes(), tiny_trace.trace)
    assert len(rows) == 8   # 4 layers: post-attention norms, the next layers' input norms, the final norm
    assert all(r.residual.n_diff == 0 and r.normalised.n_diff == 0 for r in rows)
    assert sum(r.hf_normalised.n_diff for r in rows) > 0      # rounding first moves some elements
    assert max(r.hf_normalised.max_ulps for r in rows) >= 1
