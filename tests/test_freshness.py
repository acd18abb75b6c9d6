"""annotate.trace.freshness: `--if-stale` decides "up to date" without importing torch, with the
pipeline's own inputs key (one home), and still finds a stale trace."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from annotate.trace.freshness import TraceRequest, default_out, inputs_key, torch_version, up_to_date
from annotate.trace.model.options import TraceOptions
from annotate.trace.format.provenance import vendor_facts

ROOT = Path(__file__).resolve().parents[1]

#: runs the CLI in a fresh process and says, after it, whether torch was ever imported
_PROBE = ("import sys; from annotate.cli import main; rc = main(sys.argv[1:]); "
          "print('torch imported' if 'torch' in sys.modules else 'no torch'); sys.exit(rc)")


def probe(*argv: str) -> subprocess.CompletedProcess[str]:
    """`annotate <argv>` in a fresh interpreter, reporting whether torch got imported."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run([sys.executable, "-c", _PROBE, *argv], capture_output=True, text=True, env=env,
                          timeout=600, cwd=ROOT)


def _tiny(out: Path) -> TraceRequest:
    return TraceRequest(TraceOptions(preset="tiny", root=ROOT), out, if_stale=True)


def test_torch_version_from_metadata_is_torchs_own() -> None:
    import torch

    assert torch_version() == torch.__version__


@pytest.mark.slow
def test_an_up_to_date_trace_is_found_without_torch(tiny_trace) -> None:
    before = (tiny_trace.out / "trace.json").stat().st_mtime_ns
    done = probe("--root", str(ROOT), "trace", "--preset", "tiny", "--out", str(tiny_trace.out), "--if-stale")
    assert done.returncode == 0, done.stderr
    assert "up to date" in done.stderr and done.stdout.strip() == "no torch"
    assert (tiny_trace.out / "trace.json").stat().st_mtime_ns == before


@pytest.mark.slow
def test_the_key_is_the_one_the_pipeline_stored(tiny_trace) -> None:
    req = _tiny(tiny_trace.out)
    assert inputs_key(req, vendor_facts(ROOT)) == tiny_trace.payload["meta"]["inputs_key"]
    assert up_to_date(req) == tiny_trace.out


@pytest.mark.slow
@pytest.mark.parametrize("field, value", [("seed", 99), ("tool", "0" * 64), ("torch", "0.0.0")])
def test_a_trace_of_other_inputs_is_stale(tiny_trace, tmp_path: Path, field: str, value: object) -> None:
    out = tmp_path / "stale"
    shutil.copytree(tiny_trace.out, out)
    payload = json.loads((out / "trace.json").read_text(encoding="utf-8"))
    payload["meta"]["inputs_key"][field] = value
    (out / "trace.json").write_text(json.dumps(payload), encoding="utf-8")
    assert up_to_date(_tiny(out)) is None


def test_no_trace_or_a_broken_one_is_not_up_to_date(tmp_path: Path) -> None:
    assert up_to_date(_tiny(tmp_path / "missing")) is None
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "trace.json").write_text("{", encoding="utf-8")
    assert up_to_date(_tiny(tmp_path / "broken")) is None


def test_default_out_names_the_default_and_the_other_traces() -> None:
    assert default_out(TraceOptions(root=ROOT), ROOT) == ROOT / "traces" / "cpu"
    assert default_out(TraceOptions(preset="tiny", root=ROOT, tp=2), ROOT).name == "cpu-bfloat16-tiny-4L-12T-tp2"
