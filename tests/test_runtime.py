"""annotate.trace.model.runtime: presets, checkpoints, validation, process group, prefill context."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from annotate.errors import UserError
from annotate.trace.model import runtime
from conftest import ROOT, _need_vendor
from tokenizer_helpers import train_tokenizer


def test_qwen3_06b_preset_is_the_real_shape() -> None:
    p = runtime.PRESETS["qwen3-0.6b"]
    assert (p.hidden_size, p.intermediate_size, p.num_attention_heads, p.num_key_value_heads,
            p.head_dim, p.vocab_size, p.num_hidden_layers) == (1024, 3072, 16, 8, 128, 151936, 28)
    cfg = runtime.preset_config(p, 4, "bfloat16")
    assert cfg["num_hidden_layers"] == 4 and cfg["model_type"] == "qwen3"


def test_random_weights_are_deterministic_per_seed() -> None:
    cfg = runtime.preset_config(runtime.PRESETS["tiny"], 2, "bfloat16")
    a = runtime.random_state_dict(cfg, 0, torch.bfloat16)
    b = runtime.random_state_dict(cfg, 0, torch.bfloat16)
    c = runtime.random_state_dict(cfg, 1, torch.bfloat16)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert not torch.equal(a["model.layers.1.mlp.down_proj.weight"], c["model.layers.1.mlp.down_proj.weight"])
    assert "model.layers.1.self_attn.q_norm.weight" in a and "model.layers.2.mlp.up_proj.weight" not in a


def _opts(**kw) -> runtime.TraceOptions:
    return runtime.TraceOptions(**{"preset": "tiny", "root": ROOT, **kw})


def test_checkpoint_is_loaded_through_the_vendored_loader(tmp_path: Path) -> None:
    _need_vendor()
    cfg = runtime.preset_config(runtime.PRESETS["tiny"], 4, "bfloat16")
    folder = runtime.write_checkpoint(tmp_path / "ckpt", cfg, 7, torch.bfloat16)
    rt = runtime.build_runtime(_opts(model=folder))
    try:
        sd = runtime.random_state_dict(cfg, 7, torch.bfloat16)
        qkv = rt.model.model.layers[2].self_attn.qkv_proj.weight
        want = torch.cat([sd[f"model.layers.2.self_attn.{n}_proj.weight"] for n in "qkv"])
        assert torch.equal(qkv, want)  # packed q/k/v shards went through the vendored weight_loader
        assert rt.loader_warnings == 0 and rt.model_label == "ckpt"
    finally:
        rt.close()
    cut = runtime.build_runtime(_opts(model=folder, layers=2))
    assert cut.config["num_hidden_layers"] == 2 and len(cut.model.model.layers) == 2
    assert cut.loader_warnings > 0  # weights of the cut layers were skipped, and counted


def test_prefill_context_and_process_group() -> None:
    _need_vendor()
    rt = runtime.build_runtime(_opts(tokens=5))
    import torch.distributed as dist
    from nanovllm.utils.context import get_context

    assert dist.is_initialized() and dist.get_world_size() == 1
    with runtime.prefill_context(5, rt.device):
        ctx = get_context()
        assert ctx.is_prefill and ctx.cu_seqlens_q.tolist() == [0, 5] and ctx.max_seqlen_k == 5
        assert ctx.slot_mapping.numel() == 0 and ctx.block_tables is None
    assert not get_context().is_prefill
    assert rt.input_ids.shape == (5,) and rt.positions.tolist() == list(range(5))
    rt.close()


def test_prompt_without_model_uses_utf8_bytes() -> None:
    ids, source, texts = runtime.prompt_tokens(_opts(prompt="hé"), 256, 0, None)
    assert ids == list("hé".encode("utf-8")) and "utf-8" in source and texts is None


@pytest.mark.parametrize("kw, needle", [
    ({"preset": "huge"}, "--preset huge"),
    ({"tokens": 129}, "--tokens 129"),
    ({"tokens": 0}, "--tokens 0"),
    ({"layers": 9}, "--layers 9"),
])
def test_bad_options_are_one_line_errors(kw, needle) -> None:
    with pytest.raises(UserError) as exc:
        runtime.build_runtime(_opts(**kw))
    assert needle in str(exc.value) and "\n" not in str(exc.value)


def test_model_dir_checks(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no config.json"):
        runtime.read_model_dir(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama"}))
    with pytest.raises(UserError, match="not 'qwen3'"):
        runtime.read_model_dir(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "qwen3"}))
    with pytest.raises(UserError, match="no \\*.safetensors"):
        runtime.read_model_dir(tmp_path)


def test_prompt_with_model_needs_a_tokenizer(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="tokenizer"):
        runtime.prompt_tokens(_opts(prompt="hi"), 256, 0, tmp_path)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal where CUDA is absent")
def test_cuda_without_cuda_is_refused() -> None:
    with pytest.raises(UserError, match="CUDA is not available"):
        runtime.check_device("cuda")


def test_cuda_dtype_checks_as_far_as_cpu_allows(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CUDA branch of the dtype check, with the device queries faked (no GPU here)."""
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a, **k: "Old GPU")
    with pytest.raises(UserError, match="Old GPU cannot run bfloat16"):
        runtime.check_dtype(torch.device("cuda"), "bfloat16")


def test_dtype_the_device_cannot_run(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(device, dtype):
        raise RuntimeError('"addmm_impl_cpu_" not implemented for \'Half\'')

    monkeypatch.setattr(runtime, "probe_dtype", broken)
    with pytest.raises(UserError, match="--dtype float16: cpu cannot run it"):
        runtime.check_dtype(torch.device("cpu"), "float16")


def test_probe_accepts_what_cpu_runs() -> None:
    assert runtime.check_dtype(torch.device("cpu"), "bfloat16") is torch.bfloat16
    assert runtime.check_dtype(torch.device("cpu"), "float32") is torch.float32


def test_prompt_with_model_uses_the_checkpoints_tokenizer(tmp_path: Path) -> None:
    from transformers import AutoTokenizer

    folder = tmp_path / "ckpt"
    folder.mkdir()
    train_tokenizer(folder, vocab=300)
    prompt = "the residual stream"
    ids, source, _ = runtime.prompt_tokens(_opts(prompt=prompt, model=folder), 300, 0, folder)
    assert source == "tokenizer"
    assert ids == AutoTokenizer.from_pretrained(str(folder))(prompt)["input_ids"]
    assert len(ids) < len(prompt.encode("utf-8")), "merges were learned: fewer ids than bytes"


def _sharded_checkpoint(folder: Path, shards: int, change=None) -> tuple[dict, dict[str, str]]:
    """The tiny preset (2 layers) written as ``shards`` *.safetensors files, HF's sharded layout; ``change(state)`` first.

    Returns the config and which file holds each weight.
    """
    from safetensors.torch import save_file

    folder.mkdir()
    config = runtime.preset_config(runtime.PRESETS["tiny"], 2, "float32")
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    state = runtime.random_state_dict(config, 0, torch.float32)
    if change is not None:
        change(state)
    names, where = sorted(state), {}
    for i in range(shards):
        file = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
        save_file({n: state[n] for n in names[i::shards]}, str(folder / file))
        where.update((n, file) for n in names[i::shards])
    return config, where


def _count_opens(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Route safetensors.safe_open through a wrapper that records each path it opens (and still opens it)."""
    import safetensors

    opened: list[str] = []
    real = safetensors.safe_open

    def counting(path, *args, **kw):
        opened.append(Path(path).name)
        return real(path, *args, **kw)

    monkeypatch.setattr(safetensors, "safe_open", counting)
    return opened


def test_check_weights_opens_each_file_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config, _ = _sharded_checkpoint(tmp_path / "ckpt", 3)
    opened = _count_opens(monkeypatch)
    runtime.check_weights(tmp_path / "ckpt", config, 2)
    files = sorted(p.name for p in (tmp_path / "ckpt").glob("*.safetensors"))
    assert len(runtime.expected_weights(config, 2)) > 3 * len(files)  # one open per weight would show
    assert opened == files  # each shard once, in sorted order


def test_check_weights_reads_every_shard(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bad weight in a later shard is still found through that shard's one handle."""
    bad = "model.layers.1.mlp.down_proj.weight"

    def nan(state: dict) -> None:
        state[bad].view(-1)[0] = float("nan")

    config, where = _sharded_checkpoint(tmp_path / "ckpt", 3, nan)
    assert where[bad] != sorted(set(where.values()))[0]  # not in the first shard
    opened = _count_opens(monkeypatch)
    with pytest.raises(UserError, match="holds NaN or infinite values") as exc:
        runtime.check_weights(tmp_path / "ckpt", config, 2)
    assert f"{where[bad]}: {bad}: holds NaN" in str(exc.value)
    assert len(opened) == 3 and len(set(opened)) == 3


def test_a_traces_weights_are_read_from_the_checkpoint_cache_above_it(tmp_path: Path) -> None:
    """`trace_weights(meta, near)` reads the generated checkpoint from the cache entry of a folder above `near`
    (the trace wrote it there), one tensor at a time: the same bytes as drawing them again. Without an entry it
    draws them; with the entry's file damaged it draws them too, and gives the same bytes."""
    config = runtime.preset_config(runtime.PRESETS["tiny"], 2, "bfloat16")
    meta = {"model": {"kind": "preset", "config": config}, "seed": 3, "dtype": "bfloat16"}
    drawn = runtime.random_state_dict(config, 3, torch.bfloat16)
    near = tmp_path / "traces" / "cpu"
    near.mkdir(parents=True)
    assert type(runtime.trace_weights(meta, near)) is dict                     # no cache entry: drawn again
    entry = runtime.cached_checkpoint(tmp_path, config, 3, torch.bfloat16)
    assert entry is not None
    weights = runtime.trace_weights(meta, near)
    assert isinstance(weights, runtime.CachedWeights) and weights.file == entry / "model.safetensors"
    gamma = "model.layers.1.post_attention_layernorm.weight"
    assert torch.equal(weights[gamma], drawn[gamma]) and weights._all is None   # read alone, nothing drawn
    assert weights and len(weights) == len(drawn) and weights.get("no.such.weight") is None
    assert weights._all is None   # its names come from the file's header: still nothing drawn
    assert sorted(weights) == sorted(drawn) and all(torch.equal(weights[k], drawn[k]) for k in drawn)
    other = {**meta, "seed": 4}                                                # another checkpoint: not this entry
    assert type(runtime.trace_weights(other, near)) is dict
    (entry / "model.safetensors").write_bytes(b"damaged")
    damaged = runtime.trace_weights(meta, near)
    assert isinstance(damaged, runtime.CachedWeights) and torch.equal(damaged[gamma], drawn[gamma])
    assert runtime.trace_weights({**meta, "model": {"kind": "checkpoint", "config": config}}, near) is None
