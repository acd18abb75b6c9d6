"""Where a vendored line lives on the site and upstream: page paths and pinned permalinks.

Every upstream link goes through the line map (:class:`annotate.vendoring.LineMap`): a local line
with an upstream counterpart links to that upstream line at the pinned full commit; a span with
any local-only line gets no permalink, and callers say so on the page.
"""
from __future__ import annotations

import posixpath
from dataclasses import dataclass

from annotate.source import SourceFile
from annotate.vendoring import LineMap, Lock
from annotate.vendoring.status import FileStatus

SOURCE_DIR = "source"
LOCAL_ONLY = "local-only: this line is not in the pinned upstream file, so it has no upstream permalink"


def page_src_uri(path: str) -> str:
    """Docs-relative Markdown path of a vendored file's page: ``source/nanovllm/layers/layernorm.py.md``."""
    return f"{SOURCE_DIR}/{path}.md"


def page_anchor(start: int, end: int | None = None) -> str:
    """The line anchor the page understands: ``#L36`` or ``#L28-L40``."""
    return f"#L{start}" if end is None or end == start else f"#L{start}-L{end}"


def page_url(from_src_uri: str, path: str, line: int | None = None) -> str:
    """A built-page URL (not a Markdown link) from one docs page to a source page line, for raw HTML/SVG:
    ``../source/nanovllm/models/qwen3.py.html#L154`` (the site uses ``use_directory_urls: false``)."""
    target = posixpath.relpath(f"{SOURCE_DIR}/{path}.html", posixpath.dirname(from_src_uri) or ".")
    return target + (page_anchor(line) if line else "")


def relative(from_src_uri: str, to_src_uri: str) -> str:
    """A Markdown link from one docs page to another (MkDocs rewrites .md links to pages)."""
    return posixpath.relpath(to_src_uri, posixpath.dirname(from_src_uri) or ".")


@dataclass(frozen=True)
class FileFacts:
    """What the site knows about one vendored file, computed once per build (:mod:`annotate.pages.base.snapshot`).

    ``data`` and ``source`` are the file as read and parsed, ``line_map`` its diff against the
    upstream facts of ``lock`` (the lock of the upstream that holds it), ``status`` `vendor status`'s
    verdict. Links are pure functions of these facts.
    """

    path: str
    owner: str                   # the upstream that holds it (its vendor/<name>.lock.json)
    data: bytes
    source: SourceFile | None    # None for a file that is not Python (LICENSE)
    line_map: LineMap
    status: FileStatus
    lock: Lock

    @property
    def upstream_known(self) -> bool:
        """Whether the pinned upstream commit has this file at all."""
        return self.path in self.lock.upstream.files

    def upstream_line(self, line: int) -> int | None:
        """The upstream line of local ``line``, None when it is local-only."""
        return self.line_map.upstream_line(line) if self.upstream_known else None

    def permalink(self, start: int, end: int | None = None) -> str | None:
        """Upstream permalink for local lines start..end, or None when any of them is local-only."""
        if not self.upstream_known:
            return None
        span = self.line_map.upstream_span(start, end or start)
        return None if span is None else self.lock.upstream.permalink(self.path, *span)
