"""annotate.trace.model.kernels: what is kept of Inductor's output code."""
from __future__ import annotations

from annotate.trace.model.kernels import without_source_comments


def test_inductor_origin_comments_quoting_the_source_are_dropped() -> None:
    code = ("buf0 = empty()\n"
            "        # File: /v/nanovllm/layers/layernorm.py:20 in rms_forward, code: y = f(y)\n"
            "        # Topologically Sorted Source Nodes: [y], Original ATen: [aten.mul]\n"
            "        kernel(buf0)\n")
    kept = without_source_comments(code)
    assert "code:" not in kept and "layernorm.py:20" not in kept
    assert kept.splitlines() == ["buf0 = empty()", "        # Topologically Sorted Source Nodes: [y], "
                                 "Original ATen: [aten.mul]", "        kernel(buf0)"]
