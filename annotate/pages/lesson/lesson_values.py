"""Recorded values cited in hand-written pages: ``{{value file › symbol › statement › var › layer}}``.

A lesson sentence such as "after the second norm of layer 2, ‖residual‖ = …, and it is x₁⁽²⁾" takes
its number from the default trace at build time, not from the author's keyboard. The placeholder
names the statement the way notes do (symbol + statement text, never a line number), the variable
and the layer (``none`` outside the layers); it becomes the tensor's norm, the math variable it was
identified as, a link that opens that line's values panel at that layer, and a 引用 cite button that
copies the citation (lesson and framework, file:line and symbol, the upstream permalink at the pinned
commit, the tensor, the trace it came from) — the same citation a values panel copies::

    {{value qwen3.py › Qwen3DecoderLayer.forward › hidden_states, residual =
    self.post_attention_layernorm(hidden_states, residual) › residual › 2}}

(one line in a page; broken here to fit)
    -> ‖residual‖₂ = 285.6，≡ x₁⁽²⁾（<a href="…/qwen3.py.html#L156&layer=2">qwen3.py:156 · 第 2 层</a>）

The value comes from the default trace (``traces/cpu``, the one the lesson names), and a variable it
did not record there is one :class:`UserError` line naming the page and line. Without the default
trace, another trace stands in where it fits (a committed device trace, say); where none fits, the
page says so and the build reports it on the traces' notice logger without failing, even strict.
Without any trace the placeholder says how to record one; a placeholder that names no statement,
variable or layer is one :class:`UserError` line naming the page and line.
"""
from __future__ import annotations

import logging
import re
from typing import Mapping

from annotate.links import FileFacts
from annotate.project import DOCS_FOLDER, Project
from annotate.errors import UserError
from annotate.markdown_scan import prose_lines, replace_outside_code
from annotate.pages.source.source_page import cite_head
from annotate.pages.base.trace_set import DEFAULT_KEY, NOTICE_LOGGER, TraceSet, TraceView
from annotate.trace.format.schema import VarRecord
from annotate.references import find_file
from annotate.pages.base.tracefmt import NONE_KEY, esc, layer_key, layer_name, num, sup_label, value_url
from annotate.source import AnchorError, SourceFile

PLACEHOLDER = re.compile(r"\{\{value(?P<body>(?:\s.*?)?)\}\}")   # `{{value}}`: an empty body, refused
SEP = " › "
LAYER_DIGITS = re.compile(r"[0-9]+")


def _file(sources: Mapping[str, SourceFile], name: str, where: str) -> str:
    """The vendored path a short name (`qwen3.py`) or full path stands for: the same rule as a
    ``[[…]]`` reference's (a tail several upstreams share means nano-vllm's file)."""
    return find_file(name, list(sources), f"{where}: {{{{value …}}}}")


def _lookup(views: list[TraceView], path: str, line: int, layer: int | None,
            var: str) -> tuple[TraceView, VarRecord] | None:
    """The first trace (default first) that recorded `var` on that line in that layer, with the variable.

    The default trace is the one the lesson names; another trace (a committed device trace, say, of
    other layers) stands in only when there is no default trace, and only where it fits."""
    chosen = [views[0]] if views[0].key == DEFAULT_KEY else views
    for view in chosen:
        recs = view.trace.at(path, line, layer=layer)
        rec_var = next((v for v in (r.var(var) for r in recs) if v is not None), None)
        if rec_var is not None:
            return view, rec_var
    return None


def _not_recorded(views: list[TraceView], missing: str, where: str) -> str:
    """No trace holds the value: the default trace's miss is the author's error (one line); another
    trace's miss (a device trace of other layers) is said on the page and reported, never fatal."""
    if views[0].key == DEFAULT_KEY:   # the trace the page names: the lesson must cite what it holds
        raise UserError(f"{where}: {{{{value …}}}}: {views[0].where} {missing}; name a variable the line holds")
    names = ", ".join(v.where for v in views)
    logging.getLogger(NOTICE_LOGGER).warning(
        f"{where}: {{{{value …}}}}: no trace here ({names}) {missing}; record the default trace "
        f"{Project.TRACES_DIR}/{DEFAULT_KEY} with `make site`")
    return (f'<span class="an-cited-value">（这些轨迹没有记录这个值 — no trace here recorded it: {esc(names)} '
            f"{esc(missing)}；用 <code>make site</code> 记录默认轨迹 record the default trace）</span>")


def render(body: str, page: str, sources: Mapping[str, SourceFile], traces: TraceSet | None, where: str,
           files: Mapping[str, FileFacts] | None = None) -> str:
    """The text, link and citation for one placeholder body (see the module docstring); ``files`` give the
    upstream permalink (None: the citation says it has none)."""
    parts = [p.strip() for p in body.split(SEP)]
    if len(parts) != 5:
        raise UserError(f"{where}: {{{{value {body}}}}} needs five parts separated by ' › ': "
                        "file › symbol › statement › variable › layer")
    name, symbol, statement, var, layer_text = parts
    path = _file(sources, name, where)
    source = sources.get(path)
    try:
        line = source.find(symbol, statement)[0] if source else 0
    except (AnchorError, KeyError) as exc:
        raise UserError(f"{where}: {{{{value …}}}}: {exc}; fix the statement text") from None
    layer = _layer(layer_text, where)
    views = traces.for_file(path) if traces else []
    if not views:
        return _no_values(path, traces, where)
    found = _lookup(views, path, line, layer, var)
    if found is None:
        return _not_recorded(views, f"recorded no {var!r} at {path}:{line} in layer {layer_text}", where)
    view, rec_var = found
    ident = f"，≡ {esc(sup_label(rec_var.label))}" if rec_var.identity.get("status") == "match" else ""
    href = value_url(page, path, line, layer, view.key)
    cite = value_citation(path, line, symbol, var, rec_var, layer, view, (files or {}).get(path))
    return (f'<span class="an-cited-value" data-cite-text="{esc(cite).replace(chr(10), "&#10;")}">‖<code>{esc(var)}</code>‖₂ = '
            f'{num(rec_var.norm)}{ident}'
            f'（<a href="{esc(href)}" title="打开这一行在这一层的运行值 open this line\'s values at this layer">'
            f'{esc(path.rsplit("/", 1)[-1])}:{line} · {layer_name(layer_key(layer))}</a>）'
            '<button type="button" class="an-cite" data-cite="text" title="复制引用 Copy citation" '
            'aria-label="复制引用 Copy citation">引用 cite</button></span>')


def value_citation(path: str, line: int, symbol: str, var: str, rec_var: VarRecord, layer: int | None,
                   view: TraceView, facts: FileFacts | None) -> str:
    """What the 引用 button of a cited value copies: lesson and framework, where, the upstream permalink at
    the pinned commit, the tensor and the trace it came from (annotate.js appends the derivation line)."""
    link = facts.permalink(line) if facts else None
    ident = f" ≡ {sup_label(rec_var.label)}" if rec_var.identity.get("status") == "match" else ""
    return "\n".join([
        cite_head(facts.owner if facts else "nano-vllm"),
        f"位置 where: {path}:{line} · {symbol}",
        "上游 upstream: " + (link or "本地独有，无上游链接 local-only: no upstream permalink"),
        f"张量 tensor: {var}{ident} · {layer_name(layer_key(layer))} · ‖·‖₂ = {num(rec_var.norm)}",
        f"运行 trace: {view.label} ({view.where}) · {view.trace.provenance()}"])


def _layer(text: str, where: str) -> int | None:
    """The layer a placeholder names: ASCII digits or ``none`` (``²`` passes str.isdigit but not int())."""
    if text == NONE_KEY:
        return None
    if not LAYER_DIGITS.fullmatch(text):
        raise UserError(f"{where}: {{{{value …}}}}: layer {text!r} is not a number or `none`; "
                        "write the layer in digits 0-9 (`2`) or `none`")
    return int(text)


def _no_values(path: str, traces: TraceSet | None, where: str) -> str:
    """What stands in when no fresh trace recorded ``path``: without any trace, how to record one; with
    traces that never record this file (HF's, vLLM's), an error naming the files they do record."""
    views = traces.views if traces else []
    recorded = sorted({f for v in views for f in v.trace.files()})
    if views and path not in recorded:
        raise UserError(f"{where}: {{{{value …}}}}: no trace records lines of {path} (traces record "
                        f"{', '.join(recorded) or 'no lines'}); cite a statement of one of those files")
    if traces is not None and traces.stale_for(path):
        return ("（轨迹是在另一份字节上记录的 — the trace was recorded against other bytes: "
                "<code>annotate trace --force</code>）")
    return ("（运行值需要先记录轨迹 — record a trace first: <code>make site</code>）")


def _unclosed(text: str, where: str) -> None:
    """A ``{{value`` with no ``}}`` after it on its line would be published as literal text: refuse it."""
    rest = PLACEHOLDER.sub("", text)
    if "{{value" in rest:
        raise UserError(f"{where}: unclosed {{{{value …: close it with }}}} on the same line")


def expand(markdown: str, page: str, sources: Mapping[str, SourceFile], traces: TraceSet | None,
           folder: str = DOCS_FOLDER, files: Mapping[str, FileFacts] | None = None) -> str:
    """Replace every ``{{value …}}`` on `page` (docs-relative) with the recorded value and its link;
    ``sources`` are the build's parsed vendored files (:attr:`annotate.pages.base.snapshot.Snapshot.sources`),
    ``folder`` the docs folder as messages name it (``Project.docs_label``)."""
    if "{{value" not in markdown:
        return markdown
    lines = markdown.split("\n")
    # prose only: a fence or code span that shows the syntax stays as written (as for [[…]] and {{= …}})
    for number, text in prose_lines(markdown):
        _unclosed(text, f"{folder}/{page}:{number}")
        for m in PLACEHOLDER.finditer(text):
            value = render(m.group("body"), page, sources, traces, f"{folder}/{page}:{number}", files)
            lines[number - 1] = replace_outside_code(lines[number - 1], m.group(0), value)
    return "\n".join(lines)
