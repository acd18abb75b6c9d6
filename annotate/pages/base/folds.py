"""Long tables folded by layer: one ``<details>`` a layer whose summary says what is inside, and a
page-wide switch that hides the rows on which nothing differs (``data-same``).

The experiment and tensor-parallel pages were 51–55 phone screens long, every row a card; folded, a page
is its summaries, and each row stays one tap away. docs/js/folds.js shows the switch (it does nothing
without JavaScript, so without it every row shows) and opens the fold, and reveals the row, that the
address names.
"""
from __future__ import annotations

import posixpath

#: the page-wide switch; hidden until docs/js/folds.js wires it (without JavaScript every row shows)
DIFFER_SWITCH = ('<label class="an-fold-switch" hidden><input type="checkbox" data-an-only-differ checked> '
                 "只显示有差别的行 · only the rows that differ</label>")


#: the folds' own style and script (docs/css/folds.css, docs/js/folds.js), named by the pages that fold only:
#: every other page's first open stays as light as it was
FOLD_ASSETS = ("css/folds.css", "js/folds.js")


def fold_assets(uri: str) -> str:
    """The tags that load the folds' style and script, relative to the page at docs URI ``uri``."""
    up = posixpath.relpath(".", posixpath.dirname(uri) or ".")
    css, js = (posixpath.normpath(posixpath.join(up, a)) for a in FOLD_ASSETS)
    return f'<link rel="stylesheet" href="{css}">\n<script src="{js}"></script>\n'


def layer_title(layer: int | None, outside: str = "层外 outside layers") -> str:
    """A fold's name: 第 ℓ 层 layer ℓ, or what lies outside the layers."""
    return outside if layer is None else f"第 {layer} 层 layer {layer}"


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
