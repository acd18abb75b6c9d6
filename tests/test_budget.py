"""The memory and disk of a trace, from a checkpoint's config: computed, and a refusal before any weight loads."""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
import torch

from annotate.errors import UserError
from annotate.trace.model import budget, runtime
from annotate.trace.model.options import PRESETS

REPO = Path(__file__).resolve().parents[1]


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


def test_parameters_are_counted_without_a_list_of_weights() -> None:
    """The arithmetic count equals the sum over the weight list (both tied and untied heads), and a
    10¹²-layer config is counted at once (no entry per layer)."""
    from annotate.trace.model.weight_shapes import expected_weights, parameter_count

    for preset in ("tiny", "qwen3-0.6b"):
        config = runtime.preset_config(PRESETS[preset], 3, "bfloat16")
        for tied in (True, False):
            config["tie_word_embeddings"] = tied
            listed = sum(math.prod(shape) for shape in expected_weights(config, 3).values())
            assert parameter_count(config, 3) == listed
    assert parameter_count(config, 10**12) > 10**12


def test_the_peak_is_the_fullest_stage() -> None:
    """Each stage's sum holds its terms; the traced-lines stage holds more once identify and HF's lines run
    on the device; the CPU has no cuBLAS workspace; the scores grow with T² and the copies with layers × T."""
    config = runtime.preset_config(PRESETS["qwen3-0.6b"], 28, "bfloat16")
    now = budget.estimate(config, 28, 512, "bfloat16")
    then = budget.estimate(config, 28, 512, "bfloat16", layout=budget.MEASURED_LAYOUT)
    assert then.identify == then.hf_recorded == 0 < now.identify and now.hf_recorded > 0
    assert then.stages()["reference"] == 2 * then.weights + then.rope + then.recorded + then.forward + then.workspace
    assert now.device_memory == now.stages()["hf lines"] > then.device_memory == then.stages()["reference"]
    assert budget.estimate(config, 28, 512, "bfloat16", "cpu").workspace == 0
    small, large = (budget.forward_bytes(config, n, "bfloat16") for n in (256, 4096))
    assert large > 100 * small   # 16× the tokens: the scores' T² outgrows everything linear (16×)
    assert budget.estimate(config, 14, 512, "bfloat16").recorded < now.recorded / 1.9


def _h200_runs() -> list[dict]:
    return json.loads(budget.measured_file(REPO).read_text(encoding="utf-8"))["runs"]


#: the 512-token run of 2026-12-04 is 0.8 % (63 MiB) over what the model counts: not explained yet (see the module
#: docstring of annotate/trace/model/budget.py); strict, so that the day the model counts it this mark has to go
_SHORT = pytest.mark.xfail(strict=True, reason="28 L × 512 T on the H200: the model counts 7.61 GiB, 63 MiB under "
                           "the measured 7.67 (probably the CUDA caching allocator charging whole cached blocks to "
                           "copies over 1 MiB, which a CPU measurement cannot see)")


def _layout(run: dict) -> budget.Layout:
    return budget.Layout(run["identify_on_device"], run["hf_lines_on_device"])


@pytest.mark.parametrize("run", [pytest.param(r, id=f"{r['layers']}L-{r['tokens']}T", marks=[_SHORT] if
                                              (r["tokens"], _layout(r)) == (512, budget.MEASURED_LAYOUT) else [])
                                 for r in _h200_runs()])
def test_prediction_holds_at_the_h200_measurements(run: dict) -> None:
    """The model, with the layout each run had (where identification and HF's lines ran), is never under the
    measured peak (torch.cuda.max_memory_allocated()) and at most 15 % over, at every committed shape."""
    data = json.loads(budget.measured_file(REPO).read_text(encoding="utf-8"))
    assert data["device"].startswith("NVIDIA H200") and {(r["layers"], r["tokens"]) for r in data["runs"]} >= {(28, 32),
                                                                                                            (28, 512)}
    config = runtime.preset_config(PRESETS["qwen3-0.6b"], run["layers"], run["dtype"])
    got = budget.estimate(config, run["layers"], run["tokens"], run["dtype"], "cuda",
                          layout=_layout(run)).device_memory / budget.GIB
    measured = run["max_allocated_gib"]
    assert measured <= got <= 1.15 * measured, (run["layers"], run["tokens"], got, measured)


def test_refused_before_loading_when_it_will_not_fit(tmp_path: Path) -> None:
    config = runtime.read_model_dir(checkpoint(tmp_path / "ckpt"))
    got = budget.estimate(config, 2, 12, "float32")
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
    assert "peak: HF traced lines stage" in out
    assert main(["--root", str(root), "budget", "--model", str(folder), "--memory", "0.0001"]) == 2
    assert "annotate: error: --model" in capsys.readouterr().err


@pytest.mark.parametrize("memory", ["nan", "inf", "1e308", "-1", "0"])
def test_memory_that_is_no_size_is_refused(tmp_path: Path, memory: str, capsys: pytest.CaptureFixture[str]) -> None:
    from annotate.cli import main

    folder = checkpoint(tmp_path / "ckpt")
    assert main(["--root", str(tmp_path), "budget", "--model", str(folder), "--memory", memory]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"annotate: error: --memory {float(memory):g}: expected") and "\n" not in err


def test_tokens_beyond_the_positions_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from annotate.cli import main

    folder = checkpoint(tmp_path / "ckpt")
    assert main(["--root", str(tmp_path), "budget", "--model", str(folder), "--tokens", str(10**20)]) == 2
    assert "max_position_embeddings" in capsys.readouterr().err
    assert main(["--root", str(tmp_path), "budget", "--model", str(folder), "--tokens", "128"]) == 0


def test_config_sizes_are_bounded_and_the_depth_checked(tmp_path: Path) -> None:
    """A config claiming 10¹² layers is refused by the bound before anything is built; one claiming more
    layers than the weights hold is refused by the headers; an in-bounds config is taken."""
    folder = checkpoint(tmp_path / "ckpt")
    path = folder / "config.json"
    config = json.loads(path.read_text(encoding="utf-8"))
    for layers, says in ((10**12, "expected an integer <= 1024"), (3, "but the *.safetensors hold 2 layers")):
        path.write_text(json.dumps({**config, "num_hidden_layers": layers}), encoding="utf-8")
        with pytest.raises(UserError, match=re.escape(says)):
            runtime.check_depth(folder, runtime.read_model_dir(folder))
    path.write_text(json.dumps({**config, "vocab_size": 10**9}), encoding="utf-8")
    with pytest.raises(UserError, match=r"vocab_size: expected an integer <= "):
        runtime.read_model_dir(folder)
    path.write_text(json.dumps(config), encoding="utf-8")
    runtime.check_depth(folder, runtime.read_model_dir(folder))
    assert runtime.layers_on_disk(folder) == 2


def test_trace_on_cuda_checks_memory_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """runtime.check_memory (called by build_runtime before check_weights reads a weight) asks CUDA for the
    free memory and refuses; here CUDA's answers are stood in for, a 4070 Ti with 1 KiB free."""
    from annotate.trace.model.options import TraceOptions

    folder = checkpoint(tmp_path / "ckpt")
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device: (1024, 12 * 2**30))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device: "NVIDIA GeForce RTX 4070 Ti")
    opts = TraceOptions(model=folder, device="cuda")
    with pytest.raises(UserError, match=r"NVIDIA GeForce RTX 4070 Ti has 0.00 GiB free"):
        runtime.check_memory(opts, runtime.read_model_dir(folder), 2, torch.device("cuda"))
    runtime.check_memory(opts, runtime.read_model_dir(folder), 2, torch.device("cpu"))   # CPU: not checked


def test_the_lab_page_cites_the_h200_measurement_beside_the_model() -> None:
    """The lab page's budget table is the model's (six rows), and beside it each committed H200 peak with the
    model's prediction for that run, Chinese first, saying where the model is under the measurement."""
    from annotate.pages.experiments.lab_page import lab_page

    page = lab_page(REPO, [])
    config = runtime.preset_config(PRESETS["qwen3-0.6b"], 28, "bfloat16")
    assert f"| bfloat16 | 512 | {budget.gib(budget.estimate(config, 28, 512, 'bfloat16').weights)} |" in page
    assert sum(line.startswith("| float32 |") or line.startswith("| bfloat16 |") for line in page.splitlines()) == 6
    assert "实测 Measured: NVIDIA H200" in page and "max_memory_allocated()" in page
    for run in _h200_runs():
        then = budget.estimate(config, run["layers"], run["tokens"], run["dtype"], layout=_layout(run))
        line = next(x for x in page.splitlines() if x.startswith(f"- {run['layers']} 层 × {run['tokens']} token"))
        assert f"**{run['max_allocated_gib']:.2f} GiB**" in line and budget.gib(then.device_memory) in line
        assert ("under the measurement" in line) == (then.device_memory / budget.GIB < run["max_allocated_gib"])
