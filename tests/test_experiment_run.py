"""`annotate experiment`: the edited scratch copy is traced like the baseline, vendor/ never changes.

Each run is a fresh process (as on the command line): the vendored package, once imported by the
in-process trace fixtures, cannot be imported again from a scratch copy in the same process. The
project is a temp root whose vendor/ is the repository's (a link), so the runs write nothing here.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from annotate.experiment_run import failure_line
from annotate.experiments import parse_experiment
from annotate.pages.experiments.experiment_data import compare_traces
from annotate.vendoring.lock import sha256_bytes

ROOT = Path(__file__).resolve().parents[1]
RELU = """\
title: {zh: ReLU, en: ReLU}
hypothesis: {zh: 门控换成 ReLU, en: the gate becomes a ReLU}
baseline: {preset: tiny}
edits:
  - {file: nanovllm/layers/activation.py, symbol: SiluAndMul.forward, statement: return F.silu(x) * y,
     replace: %s}
"""


def _root(tmp: Path, **experiments: str) -> Path:
    if not (ROOT / "vendor/nano-vllm/nanovllm/models/qwen3.py").is_file():
        pytest.skip("vendor/nano-vllm is not materialised; run `annotate vendor sync`")
    (tmp / "vendor").symlink_to(ROOT / "vendor", target_is_directory=True)
    (tmp / "experiments").mkdir()
    for name, text in experiments.items():
        (tmp / "experiments" / f"{name}.yml").write_text(text, encoding="utf-8")
    return tmp


def _run(root: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run([sys.executable, "-m", "annotate", "--root", str(root), "experiment", *argv, "--quiet"],
                          capture_output=True, text=True, env=env, timeout=900)


def _scratch_left() -> list[str]:
    return [p.name for p in Path(tempfile.gettempdir()).glob("annotate-exp-*")
            if p.name.split("-")[2] not in {str(os.getpid())}]


@pytest.fixture(scope="module")
def relu_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    root = _root(tmp_path_factory.mktemp("lab"), relu=RELU % "return F.relu(x) * y")
    return root, _run(root, "relu")


def test_the_edited_copy_is_traced_and_its_edits_recorded(relu_run) -> None:
    root, done = relu_run
    assert done.returncode == 0, done.stderr
    payload = json.loads((root / "traces/experiments/relu/trace.json").read_text(encoding="utf-8"))
    block = payload["experiment"]
    assert block["edits"] == [{"file": "nanovllm/layers/activation.py", "symbol": "SiluAndMul.forward",
                               "statement": "return F.silu(x) * y", "nth": 0, "replacement": ["return F.relu(x) * y"],
                               "old_span": [14, 14], "new_span": [14, 14]}]
    assert block["baseline"] == "traces/cpu-bfloat16-tiny-4L-12T"
    vendored = ROOT / "vendor/nano-vllm/nanovllm/layers/activation.py"
    assert block["baseline_files"] == {"nanovllm/layers/activation.py": sha256_bytes(vendored.read_bytes())}
    # the trace names the bytes it really ran: only the edited file differs from the lock
    assert payload["vendor"]["mismatched"] == ["nanovllm/layers/activation.py"]
    assert payload["vendor"]["files"]["nanovllm/layers/activation.py"] != block["baseline_files"]["nanovllm/layers/activation.py"]
    assert "F.relu" not in vendored.read_text(encoding="utf-8")  # vendor/ untouched


def test_if_stale_skips_an_up_to_date_experiment(relu_run) -> None:
    root, done = relu_run
    assert done.returncode == 0, done.stderr
    again = _run(root, "relu", "--if-stale")
    assert again.returncode == 0 and "is up to date" not in again.stderr  # --quiet: silent, and quick
    assert not (root / "traces/experiments/.relu.new").exists()


def test_an_up_to_date_experiment_is_found_without_torch(relu_run) -> None:
    from test_freshness import probe

    root, done = relu_run
    assert done.returncode == 0, done.stderr
    again = probe("--root", str(root), "experiment", "relu", "--if-stale")
    assert again.returncode == 0 and "is up to date" in again.stderr, again.stderr
    assert again.stdout.strip() == "no torch"
    assert not _scratch_left()


def test_compared_with_the_baseline_from_the_data(relu_run, tiny_trace) -> None:
    """ReLU changes the MLP increment from layer 0 on; everything before it in layer 0 still holds."""
    root, done = relu_run
    assert done.returncode == 0, done.stderr
    got = compare_traces(tiny_trace.out, root / "traces/experiments/relu")
    fates = {f.key: f for f in got.fates}
    assert fates["mlp"].broke[:1] == (0,) and 0 in fates["x1"].held and 0 in fates["rmsnorm1"].held
    zh, en = got.verdict()
    assert "MLP" in en and "from layer 0 on" in en and "第 0 层" in zh
    assert all(r.exp_norm is not None for r in got.rows)


def test_an_edit_that_makes_the_model_fail_is_one_line(tmp_path: Path) -> None:
    root = _root(tmp_path, broken=RELU % "return F.silu(x) * not_defined")
    done = _run(root, "broken")
    assert done.returncode == 2
    line = done.stderr.strip()
    assert "\n" not in line and "Traceback" not in line, done.stderr
    assert line.startswith("annotate: error: experiments/broken.yml: the edited model failed at "
                           "nanovllm/layers/activation.py:14: "), line
    assert "not_defined" in line and line.endswith("(nothing was written, the baseline is unchanged)")
    assert not (root / "traces/experiments/broken").exists()
    assert not _scratch_left()


@pytest.mark.parametrize("replacement, where, how", [('"raise SystemExit(0)"', 14, "SystemExit(0)"),
                                                     ('["import os", "os._exit(0)"]', 15, "os._exit(0)")])
def test_an_edit_that_exits_early_is_one_line_not_a_silent_success(tmp_path: Path, replacement: str, where: int,
                                                                  how: str) -> None:
    """`SystemExit` is no Exception and `os._exit` skips everything: both exited 0 with no trace written."""
    root = _root(tmp_path, quits=RELU % replacement)
    done = _run(root, "quits")
    line = done.stderr.strip()
    assert done.returncode == 2, done.stderr
    assert "\n" not in line and "Traceback" not in line, done.stderr
    assert line.startswith("annotate: error: experiments/quits.yml: the edited model exited at "
                           f"nanovllm/layers/activation.py:{where} ({how}) before its trace was written; "), line
    assert not (root / "traces").exists() and not _scratch_left()


def test_failure_line_without_a_place() -> None:
    x = parse_experiment(RELU % "return y", "t", "experiments/t.yml")
    got = failure_line(x, RuntimeError("boom\nmore"), Path("/nowhere"))
    assert got == ("experiments/t.yml: the edited model failed: RuntimeError: boom; fix the edit "
                   "(nothing was written, the baseline is unchanged)")
