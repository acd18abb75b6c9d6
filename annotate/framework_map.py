"""The three-framework map's data: ``map/decoder-block.yml``, rows of anchors (no line numbers).

Rows are the steps of one decoder block; each has one cell per framework (nano-vllm, HF
transformers, vLLM), a cell being a list of symbolic anchors (file › symbol › statement, ``nth``) and
which variable holds which math value after the step. The page is rendered by
:mod:`annotate.pages.map_page`; `vendor update` and `annotate check` resolve the same anchors.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from annotate import codec
from annotate.anchors import Anchor
from annotate.codec import read_text
from annotate.notes import parse_yaml
from annotate.project import Project

MAP_FILE = f"{Project.MAP_DIR}/decoder-block.yml"
FRAMEWORKS = {"nano-vllm": "nano-vllm", "transformers": "HF transformers", "vllm": "vLLM"}
FIX = f"fix {MAP_FILE} (see its header comment for the format)"


#: for which dtypes a cell's `holds` is stated: `bfloat16` (the default trace's dtype), or `both` when it is
#: as true in float32 (a cell with a `float32` mapping says what differs there instead)
DTYPES = ("bfloat16", "both")


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


def load_map(root: Path) -> list[Row] | None:
    """The rows of the map file, validated; None when the project has no map file."""
    path = root / MAP_FILE
    if not path.is_file():
        return None
    data = parse_yaml(read_text(path, MAP_FILE), MAP_FILE)
    at = codec.At(MAP_FILE, fix=FIX)
    top = codec.obj(data, at)
    rows = codec.field(top, "rows", at, codec.array)
    return [_row(item, at.key("rows").index(i)) for i, item in enumerate(rows)]


def _text(value: Any, at: codec.At) -> str:
    return codec.string(value, at)


def _row(value: Any, at: codec.At) -> Row:
    row = codec.obj(value, at)
    cells_at = at.key("cells")
    cells = codec.field(row, "cells", at, codec.obj)
    unknown = sorted(set(cells) - set(FRAMEWORKS) - {"__line__"})
    if unknown:
        cells_at.key(unknown[0]).fail(f"one of {', '.join(FRAMEWORKS)}", unknown[0])
    return Row(step=codec.field(row, "step", at, _text), zh=codec.field(row, "zh", at, _text),
               en=codec.field(row, "en", at, _text),
               cells={name: _cell(cells[name], cells_at.key(name), row.get("step", "?"), name)
                      for name in FRAMEWORKS if name in cells})


def _cell(value: Any, at: codec.At, step: str, framework: str) -> MapCell:
    cell = codec.obj(value, at)
    anchors = codec.field(cell, "anchors", at, codec.array)
    holds, float32 = (_mapping(cell, key, at) for key in ("holds", "float32"))
    dtype = codec.field(cell, "dtype", at, lambda v, a: codec.string(v, a, "|".join(DTYPES), " or ".join(DTYPES)),
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
    return Anchor(path=codec.field(item, "file", at, _text), symbol=codec.field(item, "symbol", at, _text),
                  statement=codec.field(item, "statement", at, _text),
                  nth=codec.field(item, "nth", at, lambda v, a: codec.integer(v, a, 0), 0), origin=origin)


def map_anchors(root: Path) -> list[Anchor]:
    """Every anchor of the map (none when the project has no map file)."""
    rows = load_map(root) or []
    return [a for row in rows for cell in row.cells.values() for a in cell.anchors]

