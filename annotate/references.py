"""Symbolic references from hand-written pages to vendored code, resolved at build time.

Syntax (inside any hand-written page, MkDocs' ``docs_dir``, outside code spans and fenced code)::

    [[layernorm.py › RMSNorm.add_rms_forward › residual = x.to(orig_dtype)]]
    [[nanovllm/models/qwen3.py › Qwen3Model.forward]]              (a whole symbol)
    [[qwen3.py › Qwen3Model.forward › residual = None (nth=0)]]     (nth: which repeat, 0 = first)
    [[第 {line} 行 | layernorm.py › RMSNorm.add_rms_forward › x.mul_(torch.rsqrt(var + self.eps))]]

- Parts are separated by ``›`` (or ``>``) with spaces around it: file, symbol, statement.
  The file is the vendored path or any unique tail of it (``layernorm.py``).
  The statement is compared after white-space normalisation, like notes.
- An optional label before `` | `` replaces the link text; it may use ``{file}`` (file name),
  ``{path}``, ``{line}`` (first line), ``{lines}`` (``28–40``) and ``{symbol}``.
- It renders as `` `layernorm.py:36` `` linking to the annotated page at ``#L36`` (ranges:
  ``#L28-L40``), followed by an upstream permalink at the pinned commit through the line map; a
  local-only line gets no permalink and the link says so.
- An unresolved reference (unknown file, symbol gone, statement not found) fails a strict
  build with one line naming the page and the reference; `annotate check` lists it too.
"""
from __future__ import annotations

import html
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Sequence

from annotate.anchors import Anchor, Resolution
from annotate.codec import read_text
from annotate.errors import UserError
from annotate.markdown_scan import prose_lines, replace_outside_code
from annotate.project import DOCS_FOLDER, Project, project_if_any
from annotate.vendoring.sync import vendored_files
from annotate.links import LOCAL_ONLY, FileFacts, page_anchor, page_src_uri, relative

#: the primary upstream's package folder (nano-vllm's files all live under it)
PRIMARY_PACKAGE = "nanovllm/"
_REF = re.compile(r"\[\[(?P<body>[^\n]+?)\]\](?!\])")
_SEP = re.compile(r"\s+(?:›|>)\s+")
_NTH = re.compile(r"\s*\(nth=(\d+)\)\s*$")
#: the placeholders a label may use; any other braces (LaTeX's x_{1}) are left as written
_LABEL_KEY = re.compile(r"\{(file|path|line|lines|symbol)\}")


class BadReference(UserError):
    """A reference that cannot be parsed or points at no vendored file (named so it does not shadow the
    builtin ReferenceError)."""


@dataclass(frozen=True)
class Reference:
    """One ``[[…]]`` reference found on a page."""

    raw: str  # the whole ``[[…]]`` text
    page: str  # docs-relative page path
    line: int  # 1-based line on the page
    file: str  # file part as written
    anchor: Anchor  # anchor.path is the resolved vendored path ("" if unknown)
    label: str | None = None
    folder: str = DOCS_FOLDER  # the docs folder as messages name it (Project.docs_label)

    @property
    def where(self) -> str:
        """``<docs folder>/<page>:<line>``, as every message names the reference."""
        return f"{self.folder}/{self.page}:{self.line}"


def parse_reference(body: str, page: str, line: int, files: list[str],
                    folder: str = DOCS_FOLDER) -> tuple[str, Anchor, str | None]:
    """Parse the inside of ``[[…]]`` into (file as written, anchor, label); ``folder`` names the docs folder."""
    where = f"{folder}/{page}:{line}"
    label = None
    head, bar, rest = body.partition(" | ")
    if bar and not _SEP.search(head):
        label, body = head.strip(), rest
    parts = _SEP.split(body.strip(), maxsplit=2)
    if len(parts) < 2:
        raise BadReference(f"{where}: reference [[{body}]] needs at least `file › symbol`")
    file, symbol = parts[0].strip(), parts[1].strip()
    statement, nth = (parts[2] if len(parts) == 3 else None), 0
    m = _NTH.search(statement) if statement is not None else None
    if statement is not None and m:
        statement, nth = statement[: m.start()], int(m.group(1))
    path = find_file(file, files, where)
    anchor = Anchor(path=path, symbol=symbol, statement=statement, nth=nth, origin=where, nth_set=m is not None)
    return file, anchor, label


def find_file(written: str, files: list[str], where: str) -> str:
    """The vendored path whose tail is ``written`` (exact path first); unknown or ambiguous: error.

    Several upstreams may hold a file of one name (``qwen3.py``): a tail then means the primary
    upstream's file (nano-vllm, the one this site reads) when exactly one of those matches; another
    upstream's file takes a tail unique to it (``modeling_qwen3.py``, ``models/qwen2.py``).
    """
    if written in files:
        return written
    tails = [f for f in files if f.endswith("/" + written.lstrip("/"))]
    primary = [f for f in tails if f.startswith(PRIMARY_PACKAGE)]
    if len(tails) == 1 or len(primary) == 1:
        return (primary or tails)[0]
    if not tails:
        raise BadReference(f"{where}: reference to {written!r}: no such vendored file (see `annotate vendor status`)")
    raise BadReference(f"{where}: reference to {written!r} is ambiguous ({', '.join(tails)}); write more of the path")


def find_references(markdown: str, page: str, files: list[str], folder: str = DOCS_FOLDER) -> list[Reference]:
    """Every reference on a page, skipping fenced code blocks and inline code spans.

    ``page`` is docs-relative (MkDocs' ``src_uri``); ``folder`` is the docs folder as messages name it.
    """
    found = []
    for number, text in prose_lines(markdown, fill=" "):
        for m in _REF.finditer(text):
            file, anchor, label = parse_reference(m.group("body"), page, number, files, folder)
            found.append(Reference(m.group(0), page, number, file, anchor, label, folder))
        rest = _REF.sub(lambda m: " " * len(m.group(0)), text)
        if "[[" in rest:
            start = rest.index("[[")
            raise BadReference(f"{folder}/{page}:{number}: unclosed reference {text[start:start + 40].strip()!r}; "
                                 "close it with `]]` (or put it in `code` to show the syntax)")
    return found


def scan_references(project: Project | Path | None, files: list[str] | None = None) -> list[Reference]:
    """References on every hand-written page, listed as the build lists them (for `annotate check` and
    all_anchors); ``project`` may be its root; a folder without mkdocs.yml (``None``) has no pages."""
    project = project_if_any(project) if isinstance(project, Path) else project
    if project is None:
        return []
    files = vendored_files(project.root) if files is None else files
    found = []
    for page in project.pages():
        found.extend(find_references(read_text(page.path, f"{project.docs_label}/{page.uri}"), page.uri, files,
                                     project.docs_label))
    return found


def expand(markdown: str, page: str, resolved: Sequence[tuple[Reference, Resolution]],
           files: Mapping[str, FileFacts]) -> str:
    """Replace the references of ``page`` (found and resolved beforehand, in page order) by their links."""
    outcome = dict(resolved)   # by the reference's value (page, line, text): equal references resolve alike
    return substitute(markdown, [ref for ref, _ in resolved],
                      lambda ref: render(ref, outcome[ref], files.get(ref.anchor.path), page))


def render(ref: Reference, resolution: Resolution, facts: FileFacts | None, from_page: str) -> str:
    """Markdown for a reference: page link with line anchor, then the upstream permalink (from ``facts``,
    the referenced file's); an unresolved one is shown as written, marked broken, saying why."""
    if not resolution.ok or resolution.span is None:
        return broken(ref, resolution)
    start, end = resolution.span
    a = ref.anchor
    values = {"file": a.path.rsplit("/", 1)[-1], "path": a.path, "line": str(start),
              "lines": str(start) if start == end else f"{start}–{end}", "symbol": a.symbol or ""}
    text = _LABEL_KEY.sub(lambda m: values[m.group(1)], ref.label or "`{file}:{lines}`")
    target = relative(from_page, page_src_uri(a.path)) + page_anchor(start, end)
    link = f"[{text}]({target})"
    permalink = facts.permalink(start, end) if facts else None
    if permalink is None:
        return link + f'<span class="an-upstream an-local" title="{html.escape(LOCAL_ONLY)}"> (local-only)</span>'
    return link + (f'<a class="an-upstream" href="{html.escape(permalink)}" '
                   f'title="upstream at the pinned commit">↗</a>')


def broken(ref: Reference, resolution: Resolution) -> str:
    """A reference that does not resolve (a build without --strict still shows the page): its text as
    written, and why in its title, Chinese first; everything escaped."""
    why = f"引用无法解析 reference does not resolve: {resolution.describe()}"
    return f'<span class="an-ref-broken" title="{html.escape(why)}">{html.escape(ref.raw)}</span>'


def unresolved_message(ref: Reference, resolution: Resolution) -> str:
    """One line naming the page, the reference and what happened."""
    return f"{ref.where}: reference {ref.raw} does not resolve ({resolution.describe()})"


def substitute(markdown: str, refs: list[Reference], render_one: Callable[[Reference], str]) -> str:
    """Replace each found reference (outside code) by ``render_one(reference)``, line by line."""
    lines = markdown.split("\n")
    for number, on_line in _by_line(refs).items():
        text = lines[number - 1]
        for ref in on_line:
            text = replace_outside_code(text, ref.raw, render_one(ref))
        lines[number - 1] = text
    return "\n".join(lines)


def _by_line(refs: list[Reference]) -> dict[int, list[Reference]]:
    out: dict[int, list[Reference]] = {}
    for r in refs:
        out.setdefault(r.line, []).append(r)
    return out

