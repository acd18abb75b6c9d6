"""scripts/gpu-check.sh, rehearsed on the CPU: every step of the device check runs here first, so a
lent GPU's minutes are not spent finding a typo. (The real run needs CUDA and is done by hand.)"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, _need_vendor

pytestmark = pytest.mark.slow


def test_the_gpu_check_runs_end_to_end_as_a_cpu_rehearsal(tmp_path: Path) -> None:
    _need_vendor()
    out = tmp_path / "cuda"
    committed = ROOT / "traces" / "cuda"
    existed = committed.exists()
    env = dict(os.environ, PYTHON=sys.executable, GPU_CHECK_OUT=str(out))
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "gpu-check.sh"), "--rehearse"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    trace = json.loads((out / "trace.json").read_text(encoding="utf-8"))
    assert trace["meta"]["compiled"]["ran_compiled"] and trace["meta"]["device"] == "cpu"
    bandwidth = json.loads((out / "bandwidth.json").read_text(encoding="utf-8"))
    assert 0 < bandwidth["fraction_of_copy"]["fused"] and bandwidth["fused_vs_eager"]["x"]["max_ulps"] <= 2
    log = (tmp_path / "cuda-gpu-check.log").read_text(encoding="utf-8")
    for step in ("trace (qwen3-0.6b shape", "kernel source captured (cpp)", "device copy", "done:"):
        assert step in log, step
    assert committed.exists() == existed          # a rehearsal writes nothing into traces/
