"""Which per-line extras a build uses: the values panels and HF's traced lines.

It sits above :mod:`annotate.pages.base.extras` (the protocol) and the providers that implement it, so the
protocol imports no provider and no provider imports this list.
"""
from __future__ import annotations

from typing import Mapping

from annotate.links import FileFacts
from annotate.pages.base.extras import LineExtras
from annotate.pages.source.hf_values import HfValues
from annotate.pages.base.trace_set import TraceSet
from annotate.pages.source.values import ValuesPanel


def providers(traces: TraceSet, files: Mapping[str, FileFacts],
              experiments: dict[str, list[tuple[str, str]]] | None = None) -> list[LineExtras]:
    """The providers active for this build: the values panel when ``traces/`` holds a trace (its panels
    link to the ``experiments`` editing their file), and HF's traced lines on HF's page when the trace
    recorded them against today's bytes of ``files``."""
    if not traces.views:
        return []
    hf = HfValues(traces, files)   # HF transformers' own traced lines, on its page
    return [ValuesPanel(traces, experiments or {}), *([hf] if hf.by_line else [])]
