"""Long tables folded by layer: one ``<details>`` a layer whose summary says what is inside, and a
page-wide switch that hides the rows on which nothing differs (``data-same``).

The experiment and tensor-parallel pages were 51–55 phone screens long, every row a card; folded, a page
is its summaries, and each row stays one tap away. docs/js/folds.js shows the switch (it does nothing
without JavaScript, so without it every row shows) and opens the fold, and reveals the row, that the
address names.
"""
from __future__ import annotations

from annotate.links import relative
from annotate.pages.base.tracefmt import layer_key, layer_name

#: the page-wide switch; hidden until docs/js/folds.js wires it (without JavaScript every row shows)
DIFFER_SWITCH = ('<label class="an-fold-switch" hidden><input type="checkbox" data-an-only-differ checked> '
                 "只显示有差别的行 · only the rows that differ</label>")


#: the folds' own style and script (docs/css/folds.css, docs/js/folds.js), named by the pages that fold only:
#: every other page's first open stays as light as it was
FOLD_ASSETS = ("css/folds.css", "js/folds.js")


def fold_assets(uri: str) -> str:
    """The tags that load the folds' style and script on the page at docs URI ``uri``."""
    return asset_tags(uri, *FOLD_ASSETS)


def asset_tags(uri: str, *assets: str) -> str:
    """``<link>`` for each style sheet and ``<script>`` for each script of ``assets`` (docs-relative paths),
    as the page at docs URI ``uri`` names them: for the few pages that need a file no other page loads."""
    tags = [f'<link rel="stylesheet" href="{relative(uri, a)}">' if a.endswith(".css")
            else f'<script src="{relative(uri, a)}"></script>' for a in assets]
    return "\n".join(tags) + "\n"


def fold_title(layer: int | None, outside: str = "") -> str:
    """A fold's name, as the panels name a layer (:func:`~annotate.pages.base.tracefmt.layer_name`); ``outside``
    says what the fold outside the layers holds."""
    name = layer_name(layer_key(layer))
    return f"{name} {outside}" if layer is None and outside else name


def fold_table(css: str, head: tuple[str, ...], rows: list[str]) -> str:
    """A raw HTML table (it lives inside a fold) in its scroll box: ``head`` as its header cells."""
    return (f'<div class="an-exp-scroll"><table class="{css}"><thead><tr>' + "".join(f"<th>{h}</th>" for h in head)
            + "</tr></thead><tbody>" + "".join(rows) + "</tbody></table></div>")


def folded(css: str, title: str, count: str, table: str, differ: int | None = None) -> str:
    """One closed ``<details class="css">``: ``title · count`` as its summary, then ``table`` (raw HTML).
    ``differ`` (rows that differ) 0 adds the line that says so while the switch hides the rest."""
    none = ('<p class="an-fold-none an-fold-filtered">这里没有不同的行；关掉上面的开关可看全部。'
            " No row differs here; turn the switch above off to see them all.</p>") if differ == 0 else ""
    data = "" if differ is None else f' data-differ="{differ}"'
    return (f'<details class="{css}"{data}><summary>{title} · <span class="an-fold-count">{count}</span></summary>'
            f"{none}{table}</details>")


def folds(blocks: list[str], switch: bool = True) -> str:
    """The folds of one table, under the page-wide switch when some rows may not differ."""
    return ('<div class="an-folds">' + (DIFFER_SWITCH if switch else "") + "\n" + "\n".join(blocks) + "\n</div>\n")
