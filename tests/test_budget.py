"""The memory and disk of a trace, from a checkpoint's config: computed, and a refusal before any weight loads."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from annotate.errors import UserError
from annotate.trace import budget, runtime
from annotate.trace.options import PRESETS


def checkpoint(folder: Path, preset: str = "tiny", layers: int = 2) -> Path:
    """A generated checkpoint in a real one's layout: config.json, two safetensors shards with their index,
    tokenizer files."""
    from safetensors.torch import save_file

    folder.mkdir(parents=True)
    config = runtime.preset_config(PRESETS[preset], layers, "bfloat16")
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    weights = runtime.random_state_dict(config, 0, torch.bfloat16)
    names = sorted(weights)
    shards = {"model-00001-of-00002.safetensors": names[: len(names) // 2],
              "model-00002-of-00002.safetensors": names[len(names) // 2:]}
    for shard, keys in shards.items():
        save_file({k: weights[k] for k in keys}, str(folder / shard), metadata={"format": "pt"})
    index = {"metadata": {}, "weight_map": {k: shard for shard, keys in shards.items() for k in keys}}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index), encoding="utf-8")
    (folder / "tokenizer_config.json").write_text(json.dumps({"model_max_length": 128}), encoding="utf-8")
    (folder / "tokenizer.json").write_text(json.dumps({"version": "1.0", "model": {"type": "BPE"}}), encoding="utf-8")
    return folder


def test_weights_are_the_checkpoints_tensors(tmp_path: Path) -> None:
    """One copy of the weights is exactly what the shards hold (bf16 both), counted from the config alone."""
    folder = checkpoint(tmp_path / "ckpt")
    config = runtime.read_model_dir(folder)
    got = budget.estimate(config, 2, 12, "bfloat16")
    from safetensors import safe_open

    stored = 0
    for shard in folder.glob("*.safetensors"):
        with safe_open(str(shard), "pt", "cpu") as f:
            stored += sum(f.get_tensor(k).numel() * 2 for k in f.keys())
    assert got.weights == stored
    assert budget.estimate(config, 2, 12, "float32").weights == 2 * stored
    assert got.device_memory == 2 * got.weights + got.activations and got.recorded is None


def test_activations_grow_with_the_prompt(tmp_path: Path) -> None:
    config = runtime.read_model_dir(checkpoint(tmp_path / "ckpt"))
    small, large = (budget.activation_bytes(config, n, "bfloat16") for n in (16, 64))
    assert large > 4 * small   # linear per token plus the quadratic attention scores


def test_refused_before_loading_when_it_will_not_fit(tmp_path: Path) -> None:
    config = runtime.read_model_dir(checkpoint(tmp_path / "ckpt"))
    got = budget.estimate(config, 2, 12, "float32", units=100.0)
    budget.check_fits(got, got.device_memory, "cpu", "--model m", "float32")   # exactly fits: no error
    with pytest.raises(UserError) as err:
        budget.check_fits(got, got.device_memory - 1, "a test device", "--model m", "float32")
    line = str(err.value)
    assert line.startswith("--model m: needs about ") and "a test device has" in line and "--dtype bfloat16" in line
    assert "(nothing was loaded)" in line and "\n" not in line


def test_cli_prints_the_budget_and_refuses_over_memory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from annotate.cli import main

    folder = checkpoint(tmp_path / "ckpt")
    root = tmp_path / "root"
    root.mkdir()
    assert main(["--root", str(root), "budget", "--model", str(folder), "--memory", "12"]) == 0
    out = capsys.readouterr().out
    assert "trace of 2 layers × 32 tokens in bfloat16" in out and "fits in 12 GiB" in out
    assert "not measured" in out   # no default trace in this root: the recorder's share is not guessed
    assert main(["--root", str(root), "budget", "--model", str(folder), "--memory", "0.0001"]) == 2
    assert "annotate: error: --model" in capsys.readouterr().err


def test_trace_on_cuda_checks_memory_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """runtime.check_memory (called by build_runtime before check_weights reads a weight) asks CUDA for the
    free memory and refuses; here CUDA's answers are stood in for, a 4070 Ti with 1 KiB free."""
    from annotate.trace.options import TraceOptions

    folder = checkpoint(tmp_path / "ckpt")
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device: (1024, 12 * 2**30))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device: "NVIDIA GeForce RTX 4070 Ti")
    opts = TraceOptions(model=folder, device="cuda")
    with pytest.raises(UserError, match=r"NVIDIA GeForce RTX 4070 Ti has 0.00 GiB free"):
        runtime.check_memory(opts, runtime.read_model_dir(folder), 2, torch.device("cuda"))
    runtime.check_memory(opts, runtime.read_model_dir(folder), 2, torch.device("cpu"))   # CPU: not checked
