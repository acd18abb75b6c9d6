"""The site's navigation, in reading order, built from the pages that exist (hand-written and generated).

MkDocs' automatic nav sorts pages by file name, which puts the maintainers' pages (trace format,
updating) before the source and the lesson. An explicit ``nav:`` in mkdocs.yml cannot list the
generated pages, so the plugin builds it here from the final file list, and a ``nav:`` written in
mkdocs.yml still wins.
"""
from __future__ import annotations

from typing import Any, Iterable

#: (section title or None for a top-level page, the page/folder prefixes it holds), in reading order
ORDER: tuple[tuple[str | None, tuple[str, ...]], ...] = (
    ("首页 · Home", ("index.md",)),
    (None, ("lesson.md", "diagrams.md", "map.md")),
    ("源码 · Source", ("source/",)),
    ("运行值 · Trace", ("trace/", "values.md")),
    ("实验 · Experiments", ("experiments/", "lab.md", "route.md")),
    ("速查 · Reference", ("reference/",)),
    ("使用指南 · Guide", ("guide/",)),
    ("写作与维护 · Maintaining", ("writing.md", "updating.md", "trace-format.md", "experiment-format.md", "refuses.md")),
)
#: the annotated files in the order the lesson reads them: first in the Source section, so the
#: theme's previous / next links lead from the lesson through them
READ_FIRST_TITLE = "精读 · Read first"
READ_FIRST = ("source/nanovllm/models/qwen3.py.md", "source/nanovllm/layers/layernorm.py.md",
              "source/nanovllm/layers/activation.py.md")


def site_nav(pages: Iterable[str]) -> list[Any]:
    """A ``nav`` config for these page paths (docs-relative ``src_uri``s); unknown pages go last."""
    remaining = sorted(pages)
    nav: list[Any] = []
    for title, prefixes in ORDER:
        taken = [p for prefix in prefixes for p in remaining if _under(p, prefix)]
        remaining = [p for p in remaining if p not in taken]
        if not taken:
            continue
        if title is None:
            nav.extend(taken)
        elif len(prefixes) == 1 and not prefixes[0].endswith("/"):
            nav.append({title: taken[0]})  # a titled single page (the home page: not the site name twice)
        else:
            nav.append({title: _section(taken, prefixes)})
    nav.extend(nest(remaining))
    return nav


def _under(page: str, prefix: str) -> bool:
    return page.startswith(prefix) if prefix.endswith("/") else page == prefix


def _section(pages: list[str], prefixes: tuple[str, ...]) -> list[Any]:
    """A folder's index first, then its pages nested by sub-folder (the folder level itself dropped)."""
    out: list[Any] = []
    first = [p for p in READ_FIRST if p in pages]
    if first:
        out.append({READ_FIRST_TITLE: first})
    for prefix in prefixes:
        mine = [p for p in pages if _under(p, prefix) and p not in first]
        index = [p for p in mine if p == f"{prefix}index.md"]
        rest = [p for p in mine if p not in index]
        out.extend(index)
        out.extend(nest(rest, strip=prefix) if prefix.endswith("/") else rest)
    return out


def nest(pages: list[str], strip: str = "") -> list[Any]:
    """Pages grouped by folder, folders titled by their own names (``nanovllm``, ``layers``), pages first."""
    top: list[Any] = []
    folders: dict[str, list[str]] = {}
    for page in pages:
        head, _, tail = page[len(strip):].partition("/")
        if tail:
            folders.setdefault(head, []).append(page)
        else:
            top.append(page)
    return top + [{name: nest(members, f"{strip}{name}/")} for name, members in sorted(folders.items())]
