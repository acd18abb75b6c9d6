"""What the benchmark's floors keep for a small torch function, as JSON on stdout: the Python floor
the C floor (`bench/line_floor_c.c`) and its lean variant, each with and without copies. Run by
tests/test_line_floor.py under a Python 3.12 interpreter (`python tests/line_floor_check.py DIR`,
DIR a scratch folder for the C build)."""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

import torch  # noqa: E402

import line_floor  # noqa: E402
from annotate.trace.record.sourcemap import code_info  # noqa: E402


def toy(x: torch.Tensor) -> torch.Tensor:
    y = x * 2
    z = y.view(-1)
    y.add_(1)
    w = torch.relu(z - 3)
    return w


def kept(raw: list[Any]) -> list[Any]:
    """Per finished statement: its first line, and each kept (name, values)."""
    return [[stmt.statement.start_line, [[n, t.tolist()] for n, t in names]] for stmt, names, _ in raw]


def main() -> None:
    info = code_info(toy, "toy", ROOT)
    built = line_floor.build_c_floor(Path(sys.argv[1]))
    if isinstance(built, str):
        print(json.dumps({"unbuilt": built}))
        return
    x = torch.arange(4.0)
    out: dict[str, Any] = {}
    for copy in (True, False):
        floor = line_floor._Floor([info], copy=copy)
        line_floor._monitoring(floor, lambda: toy(x))
        out["python" + ("" if copy else ", no copies")] = kept(floor.raw)
        raw = line_floor._c_monitoring([info], lambda: toy(x), built, copy)
        out["C" + ("" if copy else ", no copies")] = kept(raw)
        lean = line_floor._c_monitoring([info], lambda: toy(x), built, copy, lean=True)
        out["C lean" + ("" if copy else ", no copies")] = kept(lean)
        out["snapshots" + ("" if copy else ", no copies")] = [[type(r[2]).__name__ for r in raw], [type(r[2]).__name__ for r in lean]]
    out["counts"] = {v: line_floor.record([info], lambda: toy(x), "monitoring", v, built) for v in line_floor.VARIANTS}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
