"""annotate.bench_table: the performance page's tables is generated from bench/results/*.json."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from annotate.bench_table import TABLE_DOC, TABLE_END, TABLE_START, main, render, with_table
from annotate.errors import UserError

REPO = Path(__file__).resolve().parents[1]


def _results(tmp_path: Path, files: dict[str, object]) -> Path:
    results = tmp_path / "bench" / "results"
    results.mkdir(parents=True)
    for name, data in files.items():
        (results / name).write_text(json.dumps(data), encoding="utf-8")
    return results


def test_one_table_per_file_with_rows_columns_in_first_seen_order(tmp_path: Path) -> None:
    results = _results(tmp_path, {
        "b.json": {"bench": "b", "device": "cuda", "device_name": "GPU | X", "nested": {"left": "out"},
                   "rows": [{"page": "qwen3.py", "bytes": 812345, "ratio": 0.123456},
                            {"page": "a|b", "bytes": 10, "extra": True, "ratio": None}]},
        "a.json": {"rows": [{"x": 1.5}]},
        "notes.json": {"summary": "no rows: left out"},
    })
    assert render(results) == (
        "`bench/results/a.json`\n\n| x |\n|---|\n| 1.5 |\n\n"
        "`bench/results/b.json` — device_name: GPU \\| X · device: cuda\n\n| page | bytes | ratio | extra |\n|---|---|---|---|\n"
        "| qwen3.py | 812,345 | 0.1235 | — |\n| a\\|b | 10 | — | yes |")


def test_the_block_between_the_markers_is_replaced_and_nothing_else(tmp_path: Path) -> None:
    readme = f"# T\n\nbefore\n{TABLE_START}\nold table\n{TABLE_END}\nafter\n"
    assert with_table(readme, "| x |") == f"# T\n\nbefore\n{TABLE_START}\n| x |\n{TABLE_END}\nafter\n"
    assert with_table(with_table(readme, "| x |"), "| x |") == with_table(readme, "| x |")   # idempotent
    with pytest.raises(UserError, match="marker lines"):
        with_table("# no markers\n", "| x |")


@pytest.mark.parametrize("data, where", [
    ({"rows": {"a": 1}}, "$.rows: expected a list"),
    ({"rows": [[1]]}, "$.rows[0]: expected an object"),
    ({"rows": [{"a": {"nested": 1}}]}, "$.rows[0].a: expected a number, a string, true/false or null"),
])
def test_a_malformed_results_file_is_one_line(tmp_path: Path, data: object, where: str,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    _results(tmp_path, {"bad.json": data})
    readme = f"{TABLE_START}\n{TABLE_END}\n"
    (tmp_path / TABLE_DOC).parent.mkdir(parents=True)
    (tmp_path / TABLE_DOC).write_text(readme, encoding="utf-8")
    assert main(["--root", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "bench/results/bad.json" in err and where in err
    assert (tmp_path / TABLE_DOC).read_text(encoding="utf-8") == readme      # nothing half-written


def test_main_writes_then_check_passes(tmp_path: Path) -> None:
    _results(tmp_path, {"pages.json": {"rows": [{"page": "map.html", "bytes": 1}]}})
    (tmp_path / TABLE_DOC).parent.mkdir(parents=True)
    (tmp_path / TABLE_DOC).write_text(f"x\n{TABLE_START}\n{TABLE_END}\n", encoding="utf-8")
    assert main(["--root", str(tmp_path), "--check"]) == 1
    assert main(["--root", str(tmp_path)]) == 0
    assert "| map.html | 1 |" in (tmp_path / TABLE_DOC).read_text(encoding="utf-8")
    assert main(["--root", str(tmp_path), "--check"]) == 0


def test_the_performance_page_is_what_the_committed_json_makes() -> None:
    readme = (REPO / TABLE_DOC).read_text(encoding="utf-8")
    assert list((REPO / "bench" / "results").glob("*.json")), "bench/results/*.json are committed"
    assert with_table(readme, render(REPO / "bench" / "results")) == readme, \
        f"{TABLE_DOC}'s tables are stale: run python -m annotate.bench_table"


def test_the_gpu_rows_name_their_device() -> None:
    """The committed H200 results reach the performance page's tables with the device named above their rows."""
    data = json.loads((REPO / "bench" / "results" / "trace-cuda.json").read_text(encoding="utf-8"))
    assert data["device"] == "cuda" and data["rows"] and all(r["device"] == "cuda" for r in data["rows"])
    text = render(REPO / "bench" / "results")
    block = text[text.index("`bench/results/trace-cuda.json`"):].split("\n\n`bench/results/", 1)[0]
    assert block.splitlines()[0].startswith(f"`bench/results/trace-cuda.json` — device_name: {data['device_name']} · ")
    assert block.count("| cuda |") == len(data["rows"])
