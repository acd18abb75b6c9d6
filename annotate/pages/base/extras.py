"""The hook for per-line extras on source pages (e.g. the trace values panel of issue 5).

Every code line of a source page is a row ``<div class="an-row" id="L36" data-line="36"
data-path="nanovllm/layers/layernorm.py">``; a provider can

- add HTML right after any line (``line_html``), e.g. a collapsed values panel; it is placed
  between code segments at page width (before that line's note cards), not inside the code table;
- add JSON to the page's data blob (``page_data``), which the page carries as
  ``<script type="application/json" id="an-page-data">`` for scripts to read offline;
- add HTML above the code, under the page's banner (``banner_html``), e.g. the page-wide trace switch;
- ship files beside the page (``data_files``), e.g. a trace's values as a script loaded when a panel
  first opens, so the page itself stays light.

Every provider implements all four (:class:`NoExtras` gives the empty answers to inherit).
Providers are listed by :func:`annotate.pages.source.providers.providers` (a room above every provider, so this
protocol imports none of them); pages without any still build.
"""
from __future__ import annotations

from typing import Any, Protocol


class LineExtras(Protocol):
    """What a provider of per-line extras implements."""

    def line_html(self, path: str, line: int) -> str:
        """HTML to insert after local line ``line`` of vendored file ``path`` ('' for none)."""

    def page_data(self, path: str) -> dict[str, Any]:
        """Extra keys for the page's JSON data blob ({} for none)."""

    def banner_html(self, path: str) -> str:
        """HTML placed above the code of ``path``'s page, under its banner ('' for none)."""

    def data_files(self, path: str) -> dict[str, str]:
        """Files shipped beside ``path``'s page: docs-relative path -> text ({} for none)."""


class NoExtras:
    """A provider that adds nothing: subclasses override what they add."""

    def line_html(self, path: str, line: int) -> str:
        return ""

    def page_data(self, path: str) -> dict[str, Any]:
        return {}

    def banner_html(self, path: str) -> str:
        return ""

    def data_files(self, path: str) -> dict[str, str]:
        return {}
