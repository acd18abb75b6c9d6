"""Distances and summaries of tensors: max |Δ|, max ulps, and the small summary a trace keeps.

Ulps are counted on the ordered integer image of the IEEE bits, so "1 ulp" means adjacent
representable numbers in the compared dtype, whatever the magnitude.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

#: how many leading values a summary keeps
HEAD = 6

_INT_VIEW = {torch.bfloat16: torch.int16, torch.float16: torch.int16, torch.float32: torch.int32}
_RANK = {torch.float32: 3, torch.float16: 2, torch.bfloat16: 1}
#: explicit mantissa bits per dtype (torch.finfo does not expose them)
_MANTISSA = {torch.bfloat16: 7, torch.float16: 10, torch.float32: 23}


@dataclass(frozen=True)
class Distance:
    """How far apart two same-shaped tensors are, measured in `dtype`."""

    max_abs: float
    max_ulps: int
    rel: float          # ‖value − reference‖₂ / ‖reference‖₂: scale-free, used to decide a match
    scale_ulps: float   # max_abs in ulps of the reference's largest magnitude (robust near zero)
    n_diff: int         # elements that differ at all (in `dtype`)
    numel: int
    dtype: str


@dataclass(frozen=True)
class Summary:
    """What a trace shows for a tensor without storing it."""

    shape: tuple[int, ...]
    dtype: str
    norm: float
    mean: float
    absmax: float
    head: tuple[float, ...]


def dtype_name(dtype: torch.dtype) -> str:
    """`torch.bfloat16` → `bfloat16`."""
    return str(dtype).removeprefix("torch.")


def coarser(a: torch.dtype, b: torch.dtype) -> torch.dtype:
    """The less precise of two float dtypes: distances are measured there."""
    return a if _RANK.get(a, 3) <= _RANK.get(b, 3) else b


def ordered_bits(t: torch.Tensor) -> torch.Tensor:
    """Map floats to int64 so that adjacent representable numbers differ by exactly 1."""
    bits = t.contiguous().view(_INT_VIEW[t.dtype]).to(torch.int64)
    int_min = -(1 << (8 * t.element_size() - 1))
    return torch.where(bits >= 0, bits, int_min - bits)


def ulp(magnitude: float, dtype: torch.dtype) -> float:
    """Spacing of representable `dtype` numbers at `magnitude` (its unit in the last place)."""
    info = torch.finfo(dtype)
    m = max(abs(magnitude), info.tiny)
    exponent = torch.floor(torch.log2(torch.tensor(m, dtype=torch.float64)))
    return float(2.0 ** (exponent - _MANTISSA[dtype]))


class Side:
    """One tensor of a distance, converted once to the compared dtype: its float32 image, the ordered
    integer image of its bits, and (read when it is the reference) its absmax, L2 norm and the ulp at
    its absmax. Made once per tensor, a side serves every distance it takes part in (identification
    measures a recorded tensor against several candidates, and a candidate against many tensors)."""

    def __init__(self, t: torch.Tensor, dtype: torch.dtype) -> None:
        self.dtype = dtype
        self.exact = t.detach().to("cpu", dtype)
        self.value = self.exact.float()
        self.bits = ordered_bits(self.exact)
        self._reference: tuple[float, float, float] | None = None

    def reference(self) -> tuple[float, float, float]:
        """absmax, L2 norm and ulp(absmax) (computed on first use)."""
        if self._reference is None:
            b = self.value
            absmax = float(b.abs().max()) if b.numel() else 0.0
            norm = float(torch.linalg.vector_norm(b)) if b.numel() else 0.0
            self._reference = (absmax, norm, ulp(absmax, self.dtype) if absmax > 0 else 0.0)
        return self._reference


def distance(value: torch.Tensor, reference: torch.Tensor) -> Distance:
    """Max |Δ| and max ulps between two tensors of one shape, in the coarser of their dtypes."""
    if tuple(value.shape) != tuple(reference.shape):
        raise ValueError(f"shapes differ: {tuple(value.shape)} vs {tuple(reference.shape)}")
    dtype = coarser(value.dtype, reference.dtype)
    return side_distance(Side(value, dtype), Side(reference, dtype))


def side_distance(value: Side, reference: Side) -> Distance:
    """:func:`distance` of two sides of one shape and dtype."""
    diff = (value.value - reference.value).abs()
    max_abs = float(diff.max()) if diff.numel() else 0.0
    ulps = (value.bits - reference.bits).abs()
    absmax, ref_norm, ref_ulp = reference.reference()
    diff_norm = float(torch.linalg.vector_norm(diff)) if diff.numel() else 0.0
    return Distance(
        max_abs=max_abs,
        max_ulps=int(ulps.max()) if ulps.numel() else 0,
        rel=diff_norm / ref_norm if ref_norm > 0 else (0.0 if diff_norm == 0 else float("inf")),
        scale_ulps=max_abs / ref_ulp if absmax > 0 else float(max_abs > 0),
        n_diff=int((ulps != 0).sum()),
        numel=value.exact.numel(),
        dtype=dtype_name(value.dtype),
    )


def summarize(t: torch.Tensor) -> Summary:
    """Shape, dtype, L2 norm, mean, absmax and the first few values (computed in float32)."""
    f = t.detach().float()
    flat = f.reshape(-1)
    return Summary(
        shape=tuple(t.shape),
        dtype=dtype_name(t.dtype),
        norm=float(torch.linalg.vector_norm(flat)) if flat.numel() else 0.0,
        mean=float(flat.mean()) if flat.numel() else 0.0,
        absmax=float(flat.abs().max()) if flat.numel() else 0.0,
        head=tuple(float(v) for v in flat[:HEAD].tolist()),
    )
