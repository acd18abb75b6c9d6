"""Where a vendored line lives on the site and upstream: page paths and pinned permalinks.

Every upstream link goes through the line map (:func:`annotate.vendoring.line_map`): a local line
with an upstream counterpart links to that upstream line at the pinned full commit; a span with
any local-only line gets no permalink, and callers say so on the page.
"""
from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from pathlib import Path

from annotate.vendoring import LineMap, Lock, Registry, line_map
from annotate.vendoring.status import FileStatus, file_status

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


@dataclass
class Links:
    """Line maps and the locks of one project (every upstream), loaded once.

    ``lock`` is the primary upstream's (nano-vllm); :meth:`lock_for` gives the lock of the
    upstream that holds a path.
    """

    root: Path
    lock: Lock | None = None
    maps: dict[str, LineMap] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.registry = Registry(self.root, {} if self.lock is None else {"nano-vllm": self.lock})
        self.lock = self.registry.lock(self.registry.all[0])

    def lock_for(self, path: str) -> Lock:
        return self.registry.lock_of(path)

    def file_status(self, path: str) -> FileStatus:
        """Identical to upstream, differs (with local-only line ranges) or local-only file: `vendor status`'s facts."""
        owner = self.registry.owner(path)
        return file_status(self.root / owner.dir, path, self.registry.lock(owner))

    def line_map(self, path: str) -> LineMap:
        if path not in self.maps:
            owner = self.registry.owner(path)
            self.maps[path] = line_map(self.root, path, self.registry.lock(owner), owner)
        return self.maps[path]

    def permalink(self, path: str, start: int, end: int | None = None) -> str | None:
        """Upstream permalink for local lines start..end, or None when any of them is local-only."""
        lock = self.lock_for(path)
        if path not in lock.upstream.files:
            return None
        span = self.line_map(path).upstream_span(start, end or start)
        return None if span is None else lock.upstream.permalink(path, *span)
