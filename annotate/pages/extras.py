"""The hook for per-line extras on source pages (e.g. the trace values panel of issue 5).

Every code line of a source page is a row ``<div class="an-row" id="L36" data-line="36"
data-path="nanovllm/layers/layernorm.py">``; a provider can

- add HTML right after any line (``line_html``), e.g. a collapsed values panel; it is placed
  between code segments at page width (before that line's note cards), not inside the code table;
- add JSON to the page's data blob (``page_data``), which the page carries as
  ``<script type="application/json" id="an-page-data">`` for scripts to read offline.

A provider may also define ``banner_html(path) -> str`` (placed above the code, under the page's
banner). Providers are listed by :func:`providers`; pages without any still build.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from annotate.pages.trace_set import TraceSet


class LineExtras(Protocol):
    """What a provider of per-line extras implements."""

    def line_html(self, path: str, line: int) -> str:
        """HTML to insert after local line ``line`` of vendored file ``path`` ('' for none)."""

    def page_data(self, path: str) -> dict[str, Any]:
        """Extra keys for the page's JSON data blob ({} for none)."""


def providers(root: Path, traces: TraceSet | None = None) -> list[LineExtras]:
    """The providers active for this project: the values panel when ``traces/`` holds a trace, and HF's
    traced lines on HF's page when the trace recorded them."""
    from annotate.pages.hf_values import HfValues
    from annotate.pages.trace_set import load_traces
    from annotate.pages.values import ValuesPanel

    if traces is None:
        from annotate.links import Links

        lock = Links(root).lock
        traces = load_traces(root, lock.upstream.commit if lock else None)
    if not traces.views:
        return []
    hf = HfValues(traces, root)   # HF transformers' own traced lines, on its page
    return [ValuesPanel(traces), *([hf] if hf.by_line else [])]
