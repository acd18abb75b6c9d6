"""The three-framework map's data: ``map/decoder-block.yml``, rows of anchors (no line numbers).

Rows are the steps of one decoder block; each has one cell per framework (nano-vllm, HF
transformers, vLLM), a cell being a list of symbolic anchors (file › symbol › statement, ``nth``) and
which variable holds which math value after the step. The page is rendered by
:mod:`annotate.pages.lesson.map_page`; `vendor update` and `annotate check` resolve the same anchors.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from annotate import codec
from annotate.anchors import Anchor
from annotate.codec import read_text
from annotate.errors import UserError
from annotate.notes import parse_yaml
from annotate.project import Project

MAP_FILE = f"{Project.MAP_DIR}/decoder-block.yml"
FRAMEWORKS = {"nano-vllm": "nano-vllm", "transformers": "HF transformers", "vllm": "vLLM"}
FIX = f"fix {MAP_FILE} (see its header comment for the format)"


#: for which dtypes a cell's `holds` is stated: `bfloat16` (the default trace's dtype), or `both` when it is
#: as true in float32 (a cell with a `float32` mapping says what differs there instead)
CELL_DTYPES = ("bfloat16", "both")


@dataclass(frozen=True)
class MapCell:
    """One framework's statements for a step; `holds` (var → math value after it) is true in `dtype`,
    `float32` says what the variables hold instead in a float32 run, where that differs."""

    anchors: tuple[Anchor, ...]
    holds: dict[str, str] = field(default_factory=dict)
    zh: str = ""
    en: str = ""
    dtype: str = "bfloat16"
    float32: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Row:
    step: str
    zh: str
    en: str
    cells: dict[str, MapCell]


#: the keys each level of the map file may hold (a mistyped key is refused, never ignored)
TOP_KEYS = ("columns", "rows")
ROW_KEYS = ("step", "zh", "en", "cells")
CELL_KEYS = ("anchors", "holds", "dtype", "float32", "zh", "en")
ANCHOR_KEYS = ("file", "symbol", "statement", "nth")
#: a step is the row's HTML id (`#step-…`, linked from the lesson): letters, digits and dashes
STEP = r"[A-Za-z0-9][A-Za-z0-9_-]*"


def load_map(root: Path) -> list[Row] | None:
    """The rows of the map file, validated; None when the project has no ``map/`` folder at all.

    With ``map/`` present the file must be there (a deleted map passed `check` before), a regular file (a
    link's target is never read: its bytes would be echoed in messages), and every key known.
    """
    path = root / MAP_FILE
    if path.is_symlink():
        raise UserError(f"{MAP_FILE}: is a symbolic link; the map must be a regular file "
                        f"(replace the link with the file itself, e.g. `git checkout {MAP_FILE}`)")
    if not path.exists() and not (root / Project.MAP_DIR).exists():
        return None
    if not path.is_file():
        raise UserError(f"{MAP_FILE}: missing or not a file, though {Project.MAP_DIR}/ exists; restore it "
                        f"(`git checkout {MAP_FILE}`) or remove {Project.MAP_DIR}/ to build without the map")
    data = parse_yaml(read_text(path, MAP_FILE), MAP_FILE)
    at = codec.At(MAP_FILE, fix=FIX)
    top = codec.obj(data, at)
    _known(top, TOP_KEYS, at)
    rows = codec.field(top, "rows", at, codec.array)
    loaded = [_row(item, at.key("rows").index(i)) for i, item in enumerate(rows)]
    _refuse_duplicate_steps(loaded, at)
    return loaded


def _known(data: dict[str, Any], keys: tuple[str, ...], at: codec.At) -> None:
    """Refuse the first key that is not one of ``keys`` (`__line__` is the YAML reader's own)."""
    unknown = [str(k) for k in data if k != "__line__" and k not in keys]
    if unknown:
        raise UserError(f"{at.file}: {at.key(unknown[0]).path}: unknown key; expected one of {', '.join(keys)} "
                        f"(line {data.get('__line__', '?')}); {FIX}")


def _refuse_duplicate_steps(rows: list[Row], at: codec.At) -> None:
    """Two rows with one `step` would give the page two elements with one HTML id."""
    seen: dict[str, int] = {}
    for i, row in enumerate(rows):
        if row.step in seen:
            raise UserError(f"{at.file}: {at.key('rows').index(i).key('step').path}: step {row.step!r} repeats "
                            f"$.rows[{seen[row.step]}]'s (each step is the row's HTML id); give it another name in {MAP_FILE}")
        seen[row.step] = i


def _text(value: Any, at: codec.At) -> str:
    return codec.string(value, at)


def _row(value: Any, at: codec.At) -> Row:
    row = codec.obj(value, at)
    _known(row, ROW_KEYS, at)
    cells_at = at.key("cells")
    cells = codec.field(row, "cells", at, codec.obj)
    unknown = sorted(set(cells) - set(FRAMEWORKS) - {"__line__"})
    if unknown:
        cells_at.key(unknown[0]).fail(f"one of {', '.join(FRAMEWORKS)}", unknown[0])
    step = codec.field(row, "step", at, lambda v, a: codec.string(v, a, STEP, "a step name of letters, digits and -"))
    return Row(step=step, zh=codec.field(row, "zh", at, _text),
               en=codec.field(row, "en", at, _text),
               cells={name: _cell(cells[name], cells_at.key(name), row.get("step", "?"), name)
                      for name in FRAMEWORKS if name in cells})


def _cell(value: Any, at: codec.At, step: str, framework: str) -> MapCell:
    cell = codec.obj(value, at)
    _known(cell, CELL_KEYS, at)
    anchors = codec.field(cell, "anchors", at, codec.array)
    holds, float32 = (_mapping(cell, key, at) for key in ("holds", "float32"))
    dtype = codec.field(cell, "dtype", at, lambda v, a: codec.string(v, a, "|".join(CELL_DTYPES), " or ".join(CELL_DTYPES)),
                        "bfloat16")
    if dtype == "both" and float32:
        at.key("dtype").fail("bfloat16 when the cell says what float32 holds", dtype)
    return MapCell(anchors=tuple(_anchor(a, at.key("anchors").index(i), f"{MAP_FILE}: {step} › {framework}")
                              for i, a in enumerate(anchors)),
                holds=holds, zh=codec.field(cell, "zh", at, _text, ""), en=codec.field(cell, "en", at, _text, ""),
                dtype=dtype, float32=float32)


def _mapping(cell: dict[str, Any], key: str, at: codec.At) -> dict[str, str]:
    """A cell's variable → math value mapping (`holds`, `float32`)."""
    return {k: codec.string(v, at.key(key).key(k)) for k, v in codec.field(cell, key, at, codec.obj, {}).items()
            if k != "__line__"}


def _anchor(value: Any, at: codec.At, origin: str) -> Anchor:
    item = codec.obj(value, at)
    _known(item, ANCHOR_KEYS, at)
    return Anchor(path=codec.field(item, "file", at, _text), symbol=codec.field(item, "symbol", at, _text),
                  statement=codec.field(item, "statement", at, _text),
                  nth=codec.field(item, "nth", at, lambda v, a: codec.integer(v, a, 0), 0), origin=origin,
                  nth_set="nth" in item)   # without `nth`, a statement that repeats is refused (ambiguous)


def map_anchors(root: Path) -> list[Anchor]:
    """Every anchor of the map (none when the project has no map file)."""
    rows = load_map(root) or []
    return [a for row in rows for cell in row.cells.values() for a in cell.anchors]

