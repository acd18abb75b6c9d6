"""annotate/trace/record/monitor.py: line events from sys.monitoring (PEP 669) give what sys.settrace gives.

The suite runs on Python 3.11, which has no sys.monitoring; `make test` builds a Python 3.12 venv
beside it (`make py312`) and names its interpreter in ANNOTATE_PY312. The tests run there in a
subprocess: the events for small programs (tests/monitor_check.py) and a whole tiny trace recorded
with each backend. Where no Python 3.12 is found they skip, saying so.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from annotate.trace.model.options import BACKENDS, check_backend, default_backend
from conftest import ROOT, record_tiny_in, run_cli, tiny_trace_py312

sys.path.insert(0, str(Path(__file__).parent))
from test_recorder import records_structure


def _py312() -> str:
    """A Python ≥ 3.12 with this project installed: this one, or the one `make test` names."""
    if sys.version_info >= (3, 12):
        return sys.executable
    path = os.environ.get("ANNOTATE_PY312", "")
    if not path or not Path(path).is_file():
        pytest.skip("no Python 3.12 venv: `make test` builds one (make py312) and names it in ANNOTATE_PY312")
    return path


def test_the_default_backend_is_the_interpreters_best() -> None:
    assert default_backend() == ("monitoring" if sys.version_info >= (3, 12) else "settrace")
    assert set(BACKENDS) == {"monitoring", "settrace"}
    with pytest.raises(ValueError, match="unknown backend 'ptrace'"):
        check_backend("ptrace")


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="this interpreter has sys.monitoring")
def test_monitoring_is_refused_in_one_line_before_312(tmp_path: Path) -> None:
    rc, out, err = run_cli("trace", "--preset", "tiny", "--out", str(tmp_path / "t"), "--line-events", "monitoring")
    assert rc != 0
    assert err.strip().count("\n") == 0 and "needs Python 3.12" in err and "settrace" in err, err
    assert "Traceback" not in err and not (tmp_path / "t").exists()


def test_monitor_delivers_the_events_settrace_gives() -> None:
    """Nested watched calls through an unwatched one, a declined frame, exceptions raised and
    caught in a watched frame, in an unwatched callee, and one unwinding a watched frame."""
    res = subprocess.run([_py312(), str(ROOT / "tests" / "monitor_check.py")], capture_output=True, text=True,
                         timeout=120, check=False)
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout)
    assert got["python"] >= "3.12"
    assert got["monitoring"] == got["settrace"]
    kinds = {e[0] for e in got["monitoring"]}
    assert {"start", "line", "return", "exception", "result"} <= kinds
    assert ["return", "inner", None] in got["monitoring"]          # an unwound frame returns None
    assert not any(e[0] == "line" and e[1] is None for e in got["monitoring"])   # the declined frame's lines


def test_an_eager_fallback_is_seen_under_monitoring() -> None:
    """Negative control on 3.12: with Dynamo forced eager, the original compiled bodies run outside
    any replay, and the PY_START events of their code objects count them as escapes."""
    res = subprocess.run([_py312(), str(ROOT / "tests" / "monitor_check.py"), "--fallback"], capture_output=True,
                         text=True, timeout=600, check=False, cwd=ROOT)
    assert res.returncode == 0, res.stderr[-3000:]
    got = json.loads(res.stdout.strip().splitlines()[-1])
    assert got["backend"] == "monitoring"
    assert got.get("RMSNorm.rms_forward", 0) > 0 and got.get("SiluAndMul.forward", 0) > 0, got


@pytest.mark.slow
def test_both_backends_record_the_same_tiny_trace(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    """The tiny trace recorded on Python 3.12 with sys.monitoring and with sys.settrace: every
    field of every record equal (timings aside), the tensors byte for byte, and the records'
    structure the one the 3.11 recorder made (tests/golden/recorder/tiny-records.jsonl). The
    sys.monitoring run is the session's (conftest.tiny_trace_py312, which test_native reads too)."""
    py = _py312()
    payloads, outs = {}, {}
    for backend in BACKENDS:
        if backend == "monitoring":
            out = tiny_trace_py312(tmp_path_factory, py)
        else:
            out = tmp_path / backend
            record_tiny_in(py, out, "--line-events", backend)
        outs[backend] = out
        payloads[backend] = json.loads((out / "trace.json").read_text(encoding="utf-8"))
        assert payloads[backend]["meta"]["recorder"]["line_events"] == backend
        assert payloads[backend]["meta"]["versions"]["python"] >= "3.12"
        assert payloads[backend]["meta"]["compiled"]["ran_compiled"] is True
    mon, st = payloads["monitoring"], payloads["settrace"]
    assert len(mon["records"]) == len(st["records"]) > 300
    for a, b in zip(mon["records"], st["records"]):
        assert {k: v for k, v in a.items() if k != "timing"} == {k: v for k, v in b.items() if k != "timing"}
    assert (outs["monitoring"] / "tensors.safetensors").read_bytes() == \
        (outs["settrace"] / "tensors.safetensors").read_bytes()
    golden = (ROOT / "tests" / "golden" / "recorder" / "tiny-records.jsonl").read_text(encoding="utf-8")
    assert records_structure(mon) == golden
