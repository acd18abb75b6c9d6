"""annotate.trace.model.numerics: ulp spacing per dtype, ulp distances."""
from __future__ import annotations

import pytest
import torch

from annotate.trace.model.numerics import distance, ulp


@pytest.mark.parametrize("dtype, bits", [(torch.bfloat16, 7), (torch.float16, 10), (torch.float32, 23)])
def test_ulp_is_the_spacing_of_adjacent_numbers(dtype: torch.dtype, bits: int) -> None:
    assert ulp(1.0, dtype) == 2.0 ** -bits and ulp(-3.0, dtype) == 2.0 ** (1 - bits)
    one = torch.tensor([1.0], dtype=dtype)
    assert float(torch.nextafter(one, torch.tensor([2.0], dtype=dtype)) - one) == ulp(1.0, dtype)


def test_one_ulp_apart() -> None:
    a = torch.tensor([1.0, 2.0], dtype=torch.bfloat16)
    b = a.clone()
    b[1] = torch.nextafter(b[1:], torch.tensor([3.0], dtype=torch.bfloat16))[0]
    d = distance(b, a)
    assert d.max_ulps == 1 and d.n_diff == 1 and d.max_abs == ulp(2.0, torch.bfloat16)
