"""The generated ``source/index.md``: every vendored file, its state against upstream, its notes."""
from __future__ import annotations

from typing import Mapping

from annotate.links import FileFacts, page_src_uri, relative
from annotate.vendoring.linemap import format_ranges

INDEX_URI = "source/index.md"


def render_index(paths: list[str], notes_count: dict[str, int], files: Mapping[str, FileFacts]) -> str:
    """A table: file (linked), upstream state, number of notes."""
    rows = ["| 文件 File | 与上游 vs upstream | 注释 Notes |", "| --- | --- | --- |"]
    for path in paths:
        rows.append(f"| [`{path}`]({relative(INDEX_URI, page_src_uri(path))}) | {_state(files[path])} "
                    f"| {notes_count.get(path, 0) or ''} |")
    return ("---\ntitle: 源码 Source files\n---\n# 源码 Source files\n\n"
            "每个文件都按本地行号完整展示；有注释的行下方是数学注释。"
            "Each file is shown whole with its local line numbers; annotated lines carry math notes.\n\n"
            + "\n".join(rows) + "\n")


def _state(facts: FileFacts) -> str:
    status = facts.status
    if status.state == "differs":
        return f"local-only lines {format_ranges(status.local_only)}" if status.local_only else "same lines, other bytes"
    return status.state
