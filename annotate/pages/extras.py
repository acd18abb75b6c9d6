"""The hook for per-line extras on source pages (e.g. the trace values panel of issue 5).

Every code line of a source page is a row ``<div class="an-row" id="L36" data-line="36"
data-path="nanovllm/layers/layernorm.py">``; a provider can

- add HTML right after any line (``line_html``), e.g. a collapsed values panel; it is placed
  between code segments at page width (before that line's note cards), not inside the code table;
- add JSON to the page's data blob (``page_data``), which the page carries as
  ``<script type="application/json" id="an-page-data">`` for scripts to read offline.

Providers are listed by :func:`providers`; pages without any still build.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol


class LineExtras(Protocol):
    """What a provider of per-line extras implements."""

    def line_html(self, path: str, line: int) -> str:
        """HTML to insert after local line ``line`` of vendored file ``path`` ('' for none)."""

    def page_data(self, path: str) -> dict[str, Any]:
        """Extra keys for the page's JSON data blob ({} for none)."""


def providers(root: Path) -> list[LineExtras]:
    """The providers active for this project (none yet: the trace values panel plugs in here)."""
    return []
