"""`vendor status`: the facts the reader is promised, in human and JSON form."""
from __future__ import annotations

import json
from pathlib import Path

from annotate.cli import main
from annotate.vendoring import read_lock, status, sync
from annotate.vendoring.lock import LOCK_NAME, VENDOR_DIR

pytest_plugins = ["vendor_fixtures"]

REPO = Path(__file__).resolve().parents[1]


def by_path(report) -> dict:
    return {f.path: f for f in report.files}


def test_default_lock_facts() -> None:
    report = status(REPO, read_lock(REPO / LOCK_NAME))
    files = by_path(report)
    assert report.commit == "2f214426530e2841e7d24c73ee0dfa914d62df56"
    assert files["nanovllm/layers/layernorm.py"].state == "identical"
    assert files["nanovllm/layers/activation.py"].state == "identical"
    assert files["nanovllm/models/qwen3.py"].state == "differs"
    assert files["nanovllm/models/qwen3.py"].local_only == [(204, 217)]
    assert not report.modified


def test_cli_human_and_json(capsys) -> None:
    assert main(["--root", str(REPO), "vendor", "status"]) == 0
    out = capsys.readouterr().out
    assert "2f214426530e2841e7d24c73ee0dfa914d62df56" in out
    assert "nano-vllm-fork==20260210" in out
    assert "nanovllm/models/qwen3.py" in out and "local-only lines 204–217" in out
    assert main(["--root", str(REPO), "vendor", "status", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    by_name = {u["name"]: u for u in data["upstreams"]}
    qwen3 = next(f for f in by_name["nano-vllm"]["files"] if f["path"] == "nanovllm/models/qwen3.py")
    assert qwen3["local_only"] == [[204, 217]]


def test_status_covers_every_upstream(capsys) -> None:
    """HF transformers and vLLM are listed with their tag pins (no full commit is known for them)."""
    assert main(["--root", str(REPO), "vendor", "status", "--json"]) == 0
    by_name = {u["name"]: u for u in json.loads(capsys.readouterr().out)["upstreams"]}
    assert list(by_name)[0] == "nano-vllm" and {"transformers", "vllm"} <= set(by_name)
    hf = by_name["transformers"]
    assert hf["commit"] == "" and "v4.57.6" in hf["pin"] and "transformers==4.57.6" in hf["source"]
    assert [f["path"] for f in hf["files"]] == ["transformers/models/qwen3/modeling_qwen3.py"]
    assert "4ba787ec9" in by_name["vllm"]["pin"]
    assert main(["--root", str(REPO), "vendor", "status"]) == 0
    out = capsys.readouterr().out
    assert "== transformers (vendor/transformers.lock.json) ==" in out and "tag v4.57.6" in out


def test_hand_edit_reported_then_restored(lock_project: Path, capsys) -> None:
    sync(lock_project)
    (lock_project / VENDOR_DIR / "nanovllm/layers/activation.py").write_text("edited\n")
    assert main(["--root", str(lock_project), "vendor", "status"]) == 1
    out = capsys.readouterr().out
    assert "nanovllm/layers/activation.py" in out and "MODIFIED" in out
    assert main(["--root", str(lock_project), "vendor", "sync"]) == 0
    assert main(["--root", str(lock_project), "vendor", "status"]) == 0


def test_bad_lock_is_one_line_and_exit_2(lock_project: Path, capsys) -> None:
    (lock_project / LOCK_NAME).write_text("{ nope")
    assert main(["--root", str(lock_project), "vendor", "sync"]) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("annotate:")]
    assert len(errors) == 1 and "invalid JSON" in errors[0] and "nano-vllm.lock.json:1:3" in errors[0]
    assert not (lock_project / VENDOR_DIR).exists()
