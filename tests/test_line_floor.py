"""bench/line_floor.py and bench/line_floor_c.c: the benchmark's floors keep what they say they keep.

The floors are not recorders (their records are not right by design), but their rows only mean
something if they do the work they stand for: the C floor keeps, statement by statement, the same
copies as the Python floor (and so does its lean variant, which reads only the watched names and keeps
no snapshot), and its copies are taken when the statement finishes (a later in-place
update does not reach them), while the `no copies` variants keep the tensors themselves. Runs under
Python 3.12 (sys.monitoring) in a subprocess, like tests/test_monitor.py.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT
from test_monitor import _py312


def test_the_c_floor_keeps_what_the_python_floor_keeps(tmp_path: Path) -> None:
    res = subprocess.run([_py312(), str(ROOT / "tests" / "line_floor_check.py"), str(tmp_path)],
                         capture_output=True, text=True, timeout=300, check=False)
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout)
    if "unbuilt" in got:
        pytest.skip(got["unbuilt"])
    assert got["C"] == got["python"] == got["C lean"]
    assert got["C, no copies"] == got["python, no copies"] == got["C lean, no copies"]
    # the lean variants read the watched names from their slots and keep no snapshot of the locals
    for key in ("snapshots", "snapshots, no copies"):
        full, lean = got[key]
        assert set(full) == {"dict"} and set(lean) == {"NoneType"} and len(full) == len(lean) == 5
    # `z = y.view(-1)` is kept as it was then (0, 2, 4, 6); without copies, as `y.add_(1)` left it
    by_name = {n: v for _, names in got["python"] for n, v in names}
    bare = {n: v for _, names in got["python, no copies"] for n, v in names}
    assert by_name["z"] == [0.0, 2.0, 4.0, 6.0] and bare["z"] == [1.0, 3.0, 5.0, 7.0]
    assert by_name["w"] == [0.0, 0.0, 2.0, 4.0]   # relu(z - 3) after the update
    counts = got["counts"]
    assert counts["events alone"] == 0
    assert counts["floor"] == counts["no copies"] == counts["C floor"] == counts["C no copies"] == len(got["python"]) == 5
    assert counts["C lean"] == counts["C lean, no copies"] == 5


def test_the_c_variants_refuse_settrace() -> None:
    sys.path.insert(0, str(ROOT / "bench"))
    import line_floor

    for variant in ("C floor", "C no copies", "C lean", "C lean, no copies", "events alone"):
        with pytest.raises(ValueError, match="sys.monitoring only"):
            line_floor.record([], lambda: None, "settrace", variant)
