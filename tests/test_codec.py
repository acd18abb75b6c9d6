"""The typed decoder: paths in messages, the shared decoders, and the one UTF-8 text reader."""
from __future__ import annotations

from pathlib import Path

import pytest

from annotate import codec
from annotate.errors import UserError

AT = codec.At("traces/cpu/trace.json", fix="regenerate it")


def test_paths_and_values_in_messages() -> None:
    expected = r'^traces/cpu/trace\.json: \$\.records\[12\]\.line: expected an integer, got "151"; regenerate it$'
    with pytest.raises(UserError, match=expected):
        codec.integer("151", AT.key("records").index(12).key("line"))
    with pytest.raises(UserError, match=r'\$\["odd key"\]: expected a list, got null'):
        codec.array(None, AT.key("odd key"))
    with pytest.raises(UserError, match=r"\$\.meta\.device_name: missing; expected a string"):
        codec.field({}, "device_name", AT.key("meta"), codec.string)


def test_booleans_are_not_integers_and_nan_is_a_number() -> None:
    with pytest.raises(UserError, match="expected an integer, got true"):
        codec.integer(True, AT)
    assert codec.number(float("nan"), AT) != codec.number(float("nan"), AT)
    with pytest.raises(UserError, match="expected a finite number"):
        codec.number(float("inf"), AT, finite=True)


def test_list_and_dict_decoders_extend_the_path() -> None:
    assert codec.list_of(codec.integer)([1, 2], AT) == [1, 2]
    with pytest.raises(UserError, match=r"\$\[1\]: expected an integer"):
        codec.list_of(codec.integer)([1, "2"], AT)
    with pytest.raises(UserError, match=r"\$\.a: expected a string, got 1"):
        codec.dict_of(codec.string)({"a": 1}, AT)


def test_read_text_names_the_byte_offset(tmp_path: Path) -> None:
    path = tmp_path / "notes.yml"
    path.write_bytes("第一行\nab\xff".encode("utf-8").replace(b"\xc3\xbf", b"\xff"))
    with pytest.raises(UserError, match=r"notes\.yml: byte 12 \(line 2\) is not UTF-8 \(0xff\)"):
        codec.read_text(path)


def test_read_json_names_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_text('{\n "a": ,\n}', encoding="utf-8")
    with pytest.raises(UserError, match=r"x\.json:2:7: invalid JSON"):
        codec.read_json(path)
