"""Computed claims in hand-written pages: numbers produced at build time by the vendored code.

Syntax (in any hand-written page, MkDocs' ``docs_dir``, outside fenced code and inline code spans)::

    {{= mlp.h1024_f3072.params }}          a number computed from the vendored Qwen3MLP -> 9437184
    {{= mlp.h1024_f3072.params:, }}        with a Python format spec            -> 9,437,184
    {{= rmsnorm.example.output }}          a vector                             -> [0.8485, 1.1314]
    {{= rmsnorm.example.output[1]:.6f }}   one element, six decimals            -> 1.131371
    {{= vendor.commit_short }}             a fact from the vendor lock

- Floats default to at most 4 decimals with trailing zeros dropped (``12.5``, ``3.5355``); a format
  spec after ``:`` applies to each element of a vector. A placeholder always expands to one line,
  so page line numbers (used by ``[[…]]`` references) do not move.
- Claims are computed by running the vendored nano-vllm (see :mod:`annotate.lesson`) and checked
  against formulas computed independently; a claim that no longer holds, an unknown claim or a bad
  placeholder is one :class:`UserError` line naming the page, the line and the claim.
- Pages without placeholders cost nothing: neither the computation nor torch is touched.
"""
from __future__ import annotations

import functools
import html
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from annotate.claim_text import ClaimError, format_value
from annotate.markdown_scan import prose_lines, replace_outside_code
from annotate.project import DOCS_FOLDER, Project

if TYPE_CHECKING:   # lesson/ imports this module's errors: the table is imported where it is used
    from annotate.lesson.table import Table

_PLACEHOLDER = re.compile(r"\{\{=(?P<body>.*?)\}\}")
_NAME = re.compile(r"^(?P<name>[a-z][a-z0-9_]*(?:\.[a-z0-9_]+)+)(?P<index>(?:\[\d+\])*)$")
_INDEX = re.compile(r"\[(\d+)\]")


@dataclass(frozen=True)
class Placeholder:
    """One ``{{= … }}`` on a page."""

    raw: str  # the whole placeholder text
    page: str  # docs-relative page path
    line: int  # 1-based line on the page
    name: str  # claim name
    index: tuple[int, ...] = ()  # element indices, outermost first
    spec: str = ""  # format spec ("" = default)
    folder: str = DOCS_FOLDER  # the docs folder as messages name it (Project.docs_label)

    @property
    def where(self) -> str:
        return f"{self.folder}/{self.page}:{self.line}"


# ---------------------------------------------------------------- finding placeholders

def parse_claim(raw: str, body: str, page: str, line: int, folder: str = DOCS_FOLDER) -> Placeholder:
    """The placeholder for ``{{=body}}``, or a ClaimError saying how to write it."""
    text, _, spec = body.strip().partition(":")
    m = _NAME.match(text.strip())
    if not m:
        raise ClaimError(f"{folder}/{page}:{line}: placeholder {raw} is not `{{{{= family.claim[index]:spec }}}}`; "
                         "write a claim name such as `{{= rmsnorm.example.rms }}`")
    index = tuple(int(i) for i in _INDEX.findall(m.group("index")))
    return Placeholder(raw, page, line, m.group("name"), index, spec.strip(), folder)


def find_claims(markdown: str, page: str, folder: str = DOCS_FOLDER) -> list[Placeholder]:
    """Every placeholder on a page (ClaimError on the first malformed one); ``folder``: the docs folder's label."""
    return [parse_claim(m.group(0), m.group("body"), page, number, folder)
            for number, text in prose_lines(markdown) for m in _PLACEHOLDER.finditer(text)]


# ---------------------------------------------------------------- values and formatting

def _pick(value: object, index: tuple[int, ...], ph: Placeholder) -> object:
    for i in index:
        if not isinstance(value, list) or i >= len(value):
            size = len(value) if isinstance(value, list) else "not a vector"
            raise ClaimError(f"{ph.where}: claim {ph.raw}: index [{i}] out of range ({size}); "
                             f"use an index below the claim's length")
        value = value[i]
    return value


def _value(ph: Placeholder, table: object) -> str:
    """The text for one placeholder, or a ClaimError saying what went wrong."""
    from annotate.lesson.table import Table

    assert isinstance(table, Table)
    claim = table.claims.get(ph.name)
    if claim is None:
        if (why := table.failure(ph.name)) is not None:
            raise ClaimError(f"{ph.where}: claim {ph.name} could not be computed from the vendored code ({why}); "
                             "fix the lesson text or the claim in annotate/lesson/")
        near = table.suggest(ph.name)
        hint = f"did you mean {', '.join(near)}?" if near else "`annotate.claims.known(root)` lists them"
        raise ClaimError(f"{ph.where}: unknown claim {ph.name}; {hint}")
    if claim.problem:
        raise ClaimError(f"{ph.where}: claim {ph.name} no longer holds: {claim.problem}; the vendored code "
                         "changed — update the lesson text and its check in annotate/lesson/")
    try:
        return format_value(_pick(claim.value, ph.index, ph), ph.spec)
    except ValueError as exc:
        raise ClaimError(f"{ph.where}: claim {ph.raw}: bad format spec {ph.spec!r} ({exc})") from None


# ---------------------------------------------------------------- the API the plugin calls

def expand(markdown: str, page: str, root: Path, *, strict: bool = True, folder: str = DOCS_FOLDER,
           table: Callable[[], Table] | None = None) -> str:
    """Replace every ``{{= claim }}`` on ``page`` by its computed value.

    ``page`` is the docs-relative path (MkDocs' ``page.file.src_uri``), ``root`` the project root,
    ``folder`` the docs folder as messages name it (``Project.docs_label``), ``table`` the build's
    claims (a build loads them once, see ``Snapshot.claims``; default: loaded from ``root``).
    Strict: the first problem raises ClaimError (a UserError), one line naming page:line and claim.
    Not strict: a problem renders as a visible marker whose tooltip says what is wrong.
    """
    if "{{=" not in markdown:
        return markdown
    found = find_claims(markdown, page, folder)
    if not found:
        return markdown
    claims = claims_table(root, table)
    lines = markdown.split("\n")
    for ph in found:
        try:
            text = _value(ph, claims)
        except ClaimError as exc:
            if strict:
                raise
            text = f'<span class="an-claim-broken" title="{html.escape(str(exc))}">⚠ {html.escape(ph.name)}</span>'
        lines[ph.line - 1] = replace_outside_code(lines[ph.line - 1], ph.raw, text)
    return "\n".join(lines)


def claims_table(root: Path, table: Callable[[], Table] | None) -> Table:
    """The claims a page is expanded against: the build's (``table``: a build loads them once, see
    ``Snapshot.claims``), else loaded from ``root`` (a page expanded outside a build). The one fallback
    for both expanders; imported on first need, so a page without placeholders never touches torch."""
    if table is not None:
        return table()
    from annotate.lesson.table import load_table

    return load_table(root)


def problems(markdown: str, page: str, table: Callable[[], Table], folder: str = DOCS_FOLDER) -> list[str]:
    """Every problem on a page, one line each (empty when all claims hold); ``table`` gives the claims,
    called only when the page has a placeholder."""
    try:
        found = find_claims(markdown, page, folder)
    except ClaimError as exc:
        return [str(exc)]
    if not found:
        return []
    claims, out = table(), []
    for ph in found:
        try:
            _value(ph, claims)
        except ClaimError as exc:
            out.append(str(exc))
    return out


def scan_claims(project: Project) -> list[str]:
    """Problems of every hand-written page, listed as the build lists them (for `annotate check`).

    The claims table is loaded once, on the first page that needs it, and shared by every page.
    """
    from annotate.codec import read_text
    from annotate.lesson.diagrams import page_problems  # the element-level diagrams' numbers too
    from annotate.lesson.table import load_table

    table = functools.cache(lambda: load_table(project.root))
    out: list[str] = []
    for page in project.pages():
        text = read_text(page.path, f"{project.docs_label}/{page.uri}")
        out += problems(text, page.uri, table, project.docs_label)
        out += page_problems(text, page.uri, table, project.docs_label)
    return out


def known(root: Path) -> dict[str, str]:
    """Claim name -> its description (what it is and where it comes from)."""
    from annotate.lesson.table import load_table

    return {name: claim.what for name, claim in sorted(load_table(root).claims.items())}

