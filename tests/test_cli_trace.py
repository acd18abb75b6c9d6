"""`annotate trace`: the report, --if-stale, and every bad input (one line, exit 2, nothing written)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from conftest import run_cli


@pytest.mark.slow
def test_report_and_breakdown(tiny_trace) -> None:
    s = tiny_trace.stdout
    assert "which math variable hidden_states (h) / residual (r) held" in s
    assert "r=x₁⁽3⁾" in s and "nano-vllm final hidden states vs HF transformers" in s
    assert "compiled paths ran compiled: yes" in s
    assert "time breakdown:" in s and "compile" in s and "reference" in s
    assert "[compile]" in tiny_trace.stderr  # progress goes to stderr


@pytest.mark.slow
def test_if_stale_skips_an_up_to_date_trace(tiny_trace) -> None:
    before = (tiny_trace.out / "trace.json").stat().st_mtime_ns
    rc, out, err = run_cli("trace", "--preset", "tiny", "--out", str(tiny_trace.out), "--if-stale")
    assert rc == 0 and "up to date" in err and out == ""
    assert (tiny_trace.out / "trace.json").stat().st_mtime_ns == before


def _bad(tmp_path: Path, *argv: str) -> str:
    out = tmp_path / "out"
    rc, stdout, stderr = run_cli("trace", "--out", str(out), *argv)
    assert rc == 2 and stdout == ""
    lines = [ln for ln in stderr.splitlines() if ln.startswith("annotate: error:")]
    assert len(lines) == 1, stderr
    assert not out.exists()  # no partial output
    return lines[0]


def test_unknown_preset(tmp_path: Path) -> None:
    assert "--preset huge: unknown preset" in _bad(tmp_path, "--preset", "huge")


def test_model_without_config_or_weights(tmp_path: Path) -> None:
    model = tmp_path / "m"
    model.mkdir()
    assert "no config.json" in _bad(tmp_path, "--model", str(model))
    (model / "config.json").write_text(json.dumps({"model_type": "qwen3", "num_hidden_layers": 2}))
    assert "no *.safetensors" in _bad(tmp_path, "--model", str(model))


def test_non_qwen3_config(tmp_path: Path) -> None:
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "llama"}))
    assert "'llama', not 'qwen3'" in _bad(tmp_path, "--model", str(model))


def test_tokens_beyond_the_position_limit(tmp_path: Path) -> None:
    assert "beyond the model's position limit" in _bad(tmp_path, "--preset", "tiny", "--tokens", "4096")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal where CUDA is absent")
def test_cuda_without_cuda(tmp_path: Path) -> None:
    assert "CUDA is not available" in _bad(tmp_path, "--preset", "tiny", "--device", "cuda")


def test_dtype_the_device_cannot_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from annotate.trace.model import runtime

    def broken(device, dtype):
        raise RuntimeError("not implemented for 'Half'")

    monkeypatch.setattr(runtime, "probe_dtype", broken)
    assert "--dtype float16: cpu cannot run it" in _bad(tmp_path, "--preset", "tiny", "--dtype", "float16")


def test_tokens_below_one_is_refused_once_for_the_cli_and_the_pipeline(tmp_path: Path) -> None:
    """One check (options.check_options), the same line whether the CLI or the pipeline is called."""
    from annotate.errors import UserError
    from annotate.progress import Progress
    from annotate.trace.model.options import TraceOptions
    from annotate.trace.pipeline import TraceRequest, run_trace

    assert _bad(tmp_path, "--preset", "tiny", "--tokens", "0") == "annotate: error: --tokens 0: need at least 1 token"
    with pytest.raises(UserError) as exc:
        run_trace(TraceRequest(TraceOptions(preset="tiny", tokens=-3, root=tmp_path), tmp_path / "out"),
                  Progress(quiet=True))
    assert str(exc.value) == "--tokens -3: need at least 1 token"
    assert not (tmp_path / "out").exists() and not (tmp_path / ".cache").exists()  # refused before the lock


def test_help_shows_the_real_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    """The help's "defaults:" line and argparse's defaults come from TRACE_DEFAULTS, and they are what a
    plain run really uses (the pipeline's depth and prompt length for the default preset)."""
    from annotate.cli import build_parser
    from annotate.trace.model.options import DEVICES, DTYPE_NAMES, TRACE_DEFAULTS, default_tokens
    from annotate.trace.pipeline import default_out, effective_layers

    d = TRACE_DEFAULTS
    parser = build_parser()
    args = parser.parse_args(["trace"])
    assert (args.preset, args.layers, args.tokens, args.dtype, args.device, args.seed) == (
        d.preset, d.layers, d.tokens, d.dtype, d.device, d.seed)
    with pytest.raises(SystemExit):
        parser.parse_args(["trace", "--help"])
    help_text = capsys.readouterr().out
    layers, tokens = effective_layers(d), default_tokens(d)
    assert (layers, tokens) == (4, 32)  # the qwen3-0.6b shape, 4 layers, 32 tokens (README's first example)
    assert (f"defaults: --preset {d.preset} --layers {layers} --tokens {tokens} --dtype {d.dtype} "
            f"--device {d.device} --seed {d.seed}") in help_text
    assert f"{{{','.join(DTYPE_NAMES)}}}" in help_text and f"{{{','.join(DEVICES)}}}" in help_text
    assert default_out(d, Path("/p")) == Path("/p/traces") / d.device  # "traces/<device> for the default trace"


def test_unwritable_out(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    rc, stdout, stderr = run_cli("trace", "--preset", "tiny", "--out", str(tmp_path / "file" / "t"))
    assert rc == 2 and "cannot write" in stderr and len(stderr.strip().splitlines()) == 1


def test_existing_out_without_force(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "trace.json").write_text("{}")
    rc, _, stderr = run_cli("trace", "--preset", "tiny", "--out", str(tmp_path / "out"))
    assert rc == 2 and "already exists; pass --force" in stderr


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_trace_runs_triton(tmp_path: Path) -> None:
    out = tmp_path / "cuda"
    rc, stdout, stderr = run_cli("trace", "--preset", "tiny", "--device", "cuda", "--out", str(out), "--quiet")
    assert rc == 0, stderr
    payload = json.loads((out / "trace.json").read_text())
    assert payload["meta"]["compiled"]["ran_compiled"]
    assert any("triton" in k["languages"] for k in payload["kernels"])


@pytest.mark.slow
def test_if_stale_regenerates_a_stale_trace(tiny_trace, tmp_path: Path) -> None:
    import shutil

    out = tmp_path / "stale"
    shutil.copytree(tiny_trace.out, out)
    payload = json.loads((out / "trace.json").read_text())
    payload["meta"]["inputs_key"]["seed"] = 99
    (out / "trace.json").write_text(json.dumps(payload))
    rc, _, err = run_cli("trace", "--preset", "tiny", "--out", str(out), "--if-stale")
    assert rc == 0 and "regenerating" in err
    fresh = json.loads((out / "trace.json").read_text())
    assert fresh["meta"]["inputs_key"] == tiny_trace.payload["meta"]["inputs_key"]


@pytest.mark.slow
def test_local_checkpoint_is_traced_and_is_the_peers_checkpoint(tiny_trace, tmp_path: Path) -> None:
    """--model: the vendored loader and the HF peer read the same folder (same shapes as the
    session trace, so the compiled functions are reused)."""
    from annotate.trace.model import runtime

    cfg = runtime.preset_config(runtime.PRESETS["tiny"], 4, "bfloat16")
    folder = runtime.write_checkpoint(tmp_path / "my-qwen3", cfg, 5, torch.bfloat16)
    out = tmp_path / "t"
    rc, stdout, err = run_cli("trace", "--model", str(folder), "--tokens", "12", "--out", str(out), "--quiet")
    assert rc == 0, err
    meta = json.loads((out / "trace.json").read_text())["meta"]
    assert meta["model"]["kind"] == "checkpoint" and meta["model"]["name"] == "my-qwen3"
    assert "r=x₁⁽3⁾" in stdout  # identified against the peer loaded from the same folder


@pytest.mark.slow
def test_local_checkpoint_with_its_tokenizer_traces_a_prompt(tiny_trace, tmp_path: Path) -> None:
    """--model DIR --prompt TEXT: the prompt goes through the checkpoint's own tokenizer."""
    from tokenizer_helpers import train_tokenizer
    from transformers import AutoTokenizer

    from annotate.trace.model import runtime

    cfg = runtime.preset_config(runtime.PRESETS["tiny"], 4, "bfloat16")
    folder = runtime.write_checkpoint(tmp_path / "qwen3-with-tokenizer", cfg, 5, torch.bfloat16)
    train_tokenizer(folder, vocab=cfg["vocab_size"])
    prompt = "the residual stream carries x"
    out = tmp_path / "t"
    rc, _, err = run_cli("trace", "--model", str(folder), "--prompt", prompt, "--out", str(out), "--quiet")
    assert rc == 0, err
    meta = json.loads((out / "trace.json").read_text())["meta"]
    assert meta["input"]["ids"] == AutoTokenizer.from_pretrained(str(folder))(prompt)["input_ids"]
    assert "tokenizer" in meta["input"]["source"]


def test_force_on_a_full_disk_is_one_line_and_keeps_the_old_trace(tiny_trace, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """safetensors reports a full disk as its own SafetensorError (not an OSError): still one line, no
    traceback (torch's distributed logging printed it under `[rank0]:`), the previous trace intact."""
    import shutil

    import safetensors.torch
    from safetensors import SafetensorError

    out = tmp_path / "traces" / "cpu"
    shutil.copytree(tiny_trace.out, out)
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    real = safetensors.torch.save_file

    def full(tensors, filename, metadata=None) -> None:   # the disk holding --out is full; /tmp is not
        if not str(filename).startswith(str(out.parent)):
            return real(tensors, filename, metadata=metadata)
        raise SafetensorError('Error while serializing: IoError(Os { code: 28, kind: StorageFull, '
                              'message: "No space left on device" })')

    monkeypatch.setattr(safetensors.torch, "save_file", full)
    rc, out_text, err = run_cli("trace", "--preset", "tiny", "--out", str(out), "--force", "--full-tensors")
    lines = [line for line in err.splitlines() if line.startswith("annotate: error:")]
    assert rc != 0 and len(lines) == 1, err
    assert "No space left on device" in lines[0] and "tensors.safetensors" in lines[0] and str(out) in lines[0]
    assert "Traceback" not in out_text + err and "[rank0]" not in err
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert sorted(p.name for p in out.parent.iterdir()) == ["cpu"]      # no staging folder left behind
