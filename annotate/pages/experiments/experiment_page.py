"""The experiment pages: one per ``experiments/<name>.yml`` plus an index (本地实验 · Experiments).

Each page shows the hypothesis, every edit as old statement → new statement linked to its line on
today's source page, the verdict computed from the data (:mod:`annotate.pages.experiments.experiment_data`),
which identities held and broke, a plot of ‖residual‖ and ‖hidden_states‖ per layer (baseline vs
experiment) and, per layer, every traced line's values side by side. Without a recorded experiment
trace (or its baseline) the page says which command records it. Nothing here is upstream text but
the single statements the experiment file cites.
"""
from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from annotate import experiments as ex
from annotate.anchors import resolve
from annotate.errors import UserError
from annotate.render.held import hold
from annotate.trace.format.store import read_payload
from annotate.links import page_url
from annotate.pages.experiments.experiment_data import PLOTTED, ExperimentComparison, ComparedRow, compare_traces
from annotate.pages.experiments.lab_page import lab_pages
from annotate.pages.base.folds import fold_assets, fold_table, fold_title, folded, folds
from annotate.pages.base.plots import LIGHT, Theme, _figure, _svg, drawn_once, figure_html, themed_files
from annotate.pages.base.tracefmt import esc, num, sup_label
from annotate.pages.source.values import compare_anchor
from annotate.project import Project
from annotate.safe_html import literal, single_line
from annotate.source import SourceFile, normalise
from annotate.trace.identify.reference import MATH_VARS

FOLDER = "experiments"
EXPERIMENTS_INDEX = f"{FOLDER}/index.md"
TRACES = Project.EXPERIMENT_TRACES_DIR
#: what MkDocs' templates would read as markup in a page title (they insert it unescaped, and Material's
#: <title> even unescapes entities): shown as their full-width forms there, exactly on the page itself
_TITLE_MARKUP = str.maketrans({"<": "＜", ">": "＞", "&": "＆", '"': "＂", "'": "＇"})


@dataclass
class ExperimentPages:
    """Pages and SVG files (docs-relative URI -> text), and anchor problems for the strict build."""

    pages: dict[str, str] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    touched: dict[str, list[str]] = field(default_factory=dict)  # vendored file -> experiment names editing it
    titles: dict[str, str] = field(default_factory=dict)  # experiment name -> "zh · en" title

    def compare_links(self) -> dict[str, list[tuple[str, str]]]:
        """Vendored file -> (page URI, title) of each experiment editing it (the values panels' compare links)."""
        return {path: [(page_uri(n), self.titles[n]) for n in names] for path, names in self.touched.items()}


def page_uri(name: str) -> str:
    return f"{FOLDER}/{name}.md"


def experiment_pages(root: Path, sources: Mapping[str, SourceFile]) -> ExperimentPages:
    """Every experiment's page and the index; a bad experiment file raises its one-line UserError."""
    out = ExperimentPages()
    found = ex.load_experiments(root)
    # the experiments share a baseline, and each trace is read by `_comparison` and `compare_traces`: read each
    # once (the comparisons only read them)
    read = functools.cache(read_payload)
    for experiment in found:
        out.titles[experiment.name] = title_text(experiment)
        for path in experiment.files:
            out.touched.setdefault(path, []).append(experiment.name)
        lines = _edit_lines(experiment, sources, out.problems)
        comparison = _comparison(root, experiment.name, read)
        if comparison is not None and (stale := stale_files(root, comparison.experiment)):
            out.problems.append(f"{TRACES}/{experiment.name}: recorded against other bytes of {', '.join(stale)}; "
                                f"re-record it with `annotate experiment {experiment.name} --force`")
            comparison = None
        uri = page_uri(experiment.name)
        if comparison is not None:
            out.files.update(themed_files(f"{FOLDER}/{experiment.name}.svg",
                                          functools.partial(experiment_norms_svg, comparison)))
        out.pages[uri] = render(experiment, lines, comparison, uri)
    out.pages[EXPERIMENTS_INDEX] = index(found, root)
    out.pages.update(lab_pages(root, found))   # 本地实验 · On your own GPU, and the route
    return out


def _edit_lines(experiment: ex.Experiment, sources: Mapping[str, SourceFile], problems: list[str]) -> list[int | None]:
    """Today's line of each edit's anchor; an anchor that no longer resolves is a problem (strict: fatal)."""
    lines: list[int | None] = []
    for edit in experiment.edits:
        got = resolve(edit.anchor, sources.get(edit.anchor.path))
        if not got.ok or got.span is None:
            problems.append(f"{edit.anchor.origin}: {edit.anchor.label}: {got.describe()}")
            lines.append(None)
        else:
            lines.append(got.span[0])
    return lines


def stale_files(root: Path, block: dict) -> list[str]:
    """Edited files whose bytes today differ from those the experiment was applied to (its trace's record)."""
    from annotate.vendoring.lock import VENDOR_DIR, sha256_bytes

    vendor = root / VENDOR_DIR
    return sorted(p for p, digest in (block.get("baseline_files") or {}).items()
                  if not (vendor / p).is_file() or sha256_bytes((vendor / p).read_bytes()) != digest)


def _comparison(root: Path, name: str, read: Callable[[Path], dict[str, Any]]) -> ExperimentComparison | None:
    """The experiment trace beside its baseline, or None when either is not recorded (yet); ``read`` reads a
    trace's payload (`store.read_payload`, or a cache of it)."""
    folder = root / TRACES / name
    if not (folder / "trace.json").is_file():
        return None
    block = read(folder).get("experiment") or {}
    baseline = root / str(block.get("baseline", ""))
    if not block.get("baseline") or not (baseline / "trace.json").is_file():
        return None
    try:
        return compare_traces(baseline, folder, read)
    except (KeyError, TypeError, ValueError) as exc:
        raise UserError(f"{folder}: cannot compare it with {baseline} ({exc}); re-record it with "
                        f"`annotate experiment {name} --force`") from None


def title_text(experiment: ex.Experiment) -> str:
    """The experiment's title as one line of plain text, "zh · en" (the front matter's, the compare links')."""
    return single_line(f"{experiment.title.zh} · {experiment.title.en}").translate(_TITLE_MARKUP)


def front_matter(title: str) -> str:
    """YAML front matter with ``title`` as one quoted scalar (JSON is YAML): no text can end or extend it."""
    return f"---\ntitle: {json.dumps(title, ensure_ascii=False)}\n---\n"


def render(experiment: ex.Experiment, lines: list[int | None], comparison: ExperimentComparison | None, uri: str) -> str:
    """The Markdown of one experiment page. The title and hypothesis are shown exactly as written
    (:func:`annotate.safe_html.literal`, in raw HTML blocks): never Markdown, links or tags."""
    t, h = experiment.title, experiment.hypothesis
    parts = [f"{front_matter(title_text(experiment))}<h1>{literal(single_line(t.zh))} · {literal(single_line(t.en))}</h1>\n",
             f'<p class="an-exp-hypothesis" lang="zh">假设：{literal(h.zh)}</p>\n'
             f'<p class="an-exp-hypothesis" lang="en">Hypothesis: {literal(h.en)}</p>\n',
             "## 改动 · The edit\n", _edits(experiment, lines, uri)]
    if comparison is None:
        parts.append(f'\n<p class="an-exp-missing">还没有这个实验的轨迹 — not recorded yet: run '
                     f"<code>annotate experiment {esc(experiment.name)}</code> (after its baseline "
                     "<code>annotate trace</code>; <code>make site</code> runs both).</p>\n")
        return "\n".join(parts)
    zh, en = comparison.verdict()
    broken, restored = (sum(1 for f in comparison.fates if f.broke), sum(1 for f in comparison.fates if f.gained))
    parts += [f'## 结论 · Verdict\n\n<p class="an-exp-verdict" data-broken="{broken}" data-restored="{restored}">'
              f"{esc(zh)}<br>{esc(en)}</p>\n",
              f"基线 baseline：<code>traces/{esc(comparison.baseline_key)}</code>（{esc(comparison.dtype)}）；"
              f"实验 experiment：<code>{TRACES}/{esc(experiment.name)}</code>。" + _final(comparison) + "\n",
              "## 恒等式 · Identities\n", _fates(comparison),
              "## ‖residual‖ 与 ‖hidden_states‖ · over layers\n",
              figure_html(f"{experiment.name}.svg", "norm of residual and hidden_states per layer, baseline vs experiment",
                          640, f"基线（实线）与实验（虚线）逐层的范数 ‖·‖₂，{comparison.dtype}",
                          f"per-layer norm ‖·‖₂, baseline (solid) vs experiment (dashed), {comparison.dtype}") + "\n",
              "## 逐行对照 · Line by line\n", fold_assets(uri) + hold(_rows(comparison, uri))]   # held: render/held.py
    return "\n".join(parts)


def _edits(experiment: ex.Experiment, lines: list[int | None], uri: str) -> str:
    items = []
    for edit, line in zip(experiment.edits, lines):
        a = edit.anchor
        where = (f'<a href="{esc(page_url(uri, a.path, line))}">{esc(a.path)}:{line}</a>' if line is not None
                 else f"{esc(a.path)} (锚点失效 anchor unresolved)")
        new = "<br>".join(f"<code>{esc(normalise(r))}</code>" for r in edit.replacement)
        items.append(f'<li class="an-exp-edit">{where} · <code>{esc(a.symbol)}</code><br>'
                     f'<del><code>{esc(normalise(a.statement or ""))}</code></del> → <ins>{new}</ins></li>')
    return '<ul class="an-exp-edits">' + "".join(items) + "</ul>\n"


def _final(c: ExperimentComparison) -> str:
    base, exp = c.final
    if not base or not exp:
        return ""
    return (f" 最终输出与 HF 的相对 L2 距离 final output vs HF (rel L2)：基线 baseline {num(base.get('rel'))}，"
            f"实验 experiment {num(exp.get('rel'))}。")


def _fates(c: ExperimentComparison) -> str:
    rows = []
    for fate in c.fates:
        parts = []
        if fate.broke:
            parts.append(f"不成立 broken: layers {', '.join(map(str, fate.broke))}")
        if fate.gained:
            parts.append(f"恢复 restored: layers {', '.join(map(str, fate.gained))}")
        status = "; ".join(parts) or "成立 holds"
        state = "broken" if fate.broke else "restored" if fate.gained else "held"
        rows.append(f'<tr class="an-exp-fate" data-key="{esc(fate.key)}" data-state="{state}">'
                    f"<td>{esc(sup_label(fate.label))}</td><td>{esc(status)}</td>"
                    f"<td>{esc(', '.join(map(str, fate.held)) or '—')}</td></tr>")
    return ('<div class="an-exp-scroll"><table class="an-exp-fates"><thead><tr><th>恒等式 identity</th>'
            "<th>实验中 in the experiment</th><th>两次都成立的层 layers holding in both</th></tr></thead><tbody>"
            + "".join(rows) + "</tbody></table></div>\n")


def _ids(keys: tuple[str, ...]) -> str:
    out = []
    for k in keys:
        key, layer = k.split("@")
        out.append(MATH_VARS[key].label.format(l=layer) if key in MATH_VARS else key)
    return sup_label(", ".join(out)) or "—"


#: the line-by-line tables' columns
_ROW_HEAD = ("行 line", "变量 var", "基线 ‖·‖ baseline", "实验 ‖·‖ experiment", "max |Δ| (ulp)",
             "基线中认出 identified in the baseline", "实验中认出 identified in the experiment")


def _same(r: ComparedRow) -> bool:
    """A row both runs hold bit for bit, identified alike: nothing on it differs."""
    return r.exp_norm is not None and r.ulps == 0 and r.base_ids == r.exp_ids


def _rows(c: ExperimentComparison, uri: str) -> str:
    """The line-by-line tables, one folded block per layer whose summary says how many rows differ; rows
    that do not differ carry ``data-same`` (hidden while the page's switch is on, one tap to show)."""
    layers = sorted({r.layer for r in c.rows if r.layer is not None})
    blocks = []
    anchored: set[str] = set()
    for layer in [None, *layers]:
        mine = [r for r in c.rows if r.layer == layer]
        if not mine:
            continue
        differ = sum(1 for r in mine if not _same(r))
        count = (f"{len(mine)} 行中 {differ} 行不同 · {differ} of {len(mine)} rows differ" if differ
                 else f"{len(mine)} 行全部相同 · all {len(mine)} rows identical")
        table = fold_table("an-exp-rows", _ROW_HEAD, [_row(r, uri, anchored) for r in mine])
        blocks.append(folded("an-exp-layer", fold_title(layer), count, table, differ))
    return folds(blocks)


def _row(r: ComparedRow, uri: str, anchored: set[str]) -> str:
    """One table row; the first row of each line carries the id the values panels' compare links use."""
    broke = ((' class="an-exp-broke"' if r.broke else "") + (" data-same" if _same(r) else "")
             + (" data-ids-same" if r.base_ids == r.exp_ids else ""))
    anchor = compare_anchor(r.file, r.line)
    if anchor not in anchored:
        anchored.add(anchor)
        broke += f' id="{esc(anchor)}"'
    ulps = ("—" if r.ulps is None else "∞" if not math.isfinite(r.ulps)
            else num(r.ulps, 2) if 0 < r.ulps < 1 else f"{r.ulps:.0f}")   # under one ulp is not 0
    return (f'<tr{broke}><td><a href="{esc(page_url(uri, r.file, r.line))}">{esc(r.file.rsplit("/", 1)[-1])}:{r.line}</a> '
            f"<small>{esc(r.function)}</small></td><td><code>{esc(r.var)}</code></td><td>{num(r.base_norm)}</td>"
            f"<td>{num(r.exp_norm) if r.exp_norm is not None else '—'}</td><td>{ulps}</td>"
            f"<td>{esc(_ids(r.base_ids))}</td><td>{esc(_ids(r.exp_ids))}</td></tr>")


def experiment_norms_svg(c: ExperimentComparison, theme: Theme = LIGHT) -> str:
    """‖residual‖ and ‖hidden_states‖ leaving each layer, baseline (solid) vs experiment (dashed)."""
    return drawn_once("experiment-norms", [[name, *c.norms[name]] for name in PLOTTED], theme, _draw_norms)


def _draw_norms(lines: list[list[Any]], theme: Theme) -> str:
    fig, ax = _figure(theme)
    for (name, base, exp), marker in zip(lines, "os"):
        xs = list(range(len(base)))
        ax.plot(xs, base, marker=marker, label=f"{name} baseline")
        ax.plot(xs, exp, marker=marker, linestyle="--", label=f"{name} experiment")
    ax.set_xlabel("ℓ")
    ax.set_ylabel("‖·‖₂")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _svg(fig)


def index(found: list[ex.Experiment], root: Path) -> str:
    """The experiments' index: what each changes and whether it is recorded."""
    rows = []
    for x in found:
        recorded = (root / TRACES / x.name / "trace.json").is_file()
        rows.append(f"| [{literal(single_line(x.title.zh))} · {literal(single_line(x.title.en))}]({esc(x.name)}.md) | "
                    f"{'已记录 recorded' if recorded else '未记录 not recorded'} | `annotate experiment {esc(x.name)}` |")
    return ("---\ntitle: 实验 · Experiments\n---\n# 实验：改一行真代码 · Experiments on the real code\n\n"
            "每个实验在 nano-vllm 的一个临时副本上按锚点改动一两条语句，用与基线相同的选项重新运行并记录轨迹，"
            "再把每个值和每个恒等式与未改动的运行对照。`vendor/` 从不被修改。"
            " Each experiment changes a statement or two of a scratch copy of nano-vllm by anchor, re-traces it with "
            "the baseline's options, and sets every value and identity beside the unchanged run's. `vendor/` is never "
            "touched.\n\n| 实验 experiment | 状态 status | 命令 command |\n| --- | --- | --- |\n" + "\n".join(rows) + "\n")
