"""bench/bench_trace.py: asking for its options measures nothing and writes nothing.

The benchmark takes minutes and writes bench/results/trace.json (the performance page's tables are
generated from it), so `--help` must print what it does and stop: a run started by asking would
replace the committed numbers with ones from whatever machine asked.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import ROOT


def test_help_prints_the_options_and_writes_nothing(tmp_path: Path) -> None:
    results = sorted((ROOT / "bench" / "results").glob("trace*.json"))
    before = {p: p.stat().st_mtime_ns for p in results}
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "bench_trace.py"), "--help",
                           "--out", str(tmp_path / "trace.json")],   # (where a run would write)
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "--rounds N" in done.stdout and "--shapes" in done.stdout
    assert "wrote" not in done.stdout and "recorder:" not in done.stdout
    assert {p: p.stat().st_mtime_ns for p in results} == before and not any(tmp_path.iterdir())
