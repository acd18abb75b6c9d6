"""annotate.trace.model.options: the one home of a trace's defaults and value checks (torch-free)."""
from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from annotate.errors import UserError
from annotate.trace.model.options import MAX_SEED, MODEL_DEFAULT_TOKENS, PRESETS, TRACE_DEFAULTS, check_options, default_tokens

REPO = Path(__file__).resolve().parents[1]


def test_the_default_trace_is_a_valid_preset_run() -> None:
    check_options(TRACE_DEFAULTS)
    assert TRACE_DEFAULTS.preset in PRESETS and TRACE_DEFAULTS.model is None
    assert default_tokens(TRACE_DEFAULTS) == PRESETS[TRACE_DEFAULTS.preset].default_tokens


def test_default_length_follows_the_preset_or_the_checkpoint() -> None:
    assert default_tokens(dataclasses.replace(TRACE_DEFAULTS, preset="tiny")) == PRESETS["tiny"].default_tokens
    assert default_tokens(dataclasses.replace(TRACE_DEFAULTS, model=Path("ckpt"))) == MODEL_DEFAULT_TOKENS


@pytest.mark.parametrize("change, message", [
    ({"tokens": 0}, "--tokens 0: need at least 1 token"),
    ({"tokens": -3}, "--tokens -3: need at least 1 token"),
    ({"seed": -1}, f"--seed -1: out of range; pass a whole number from 0 to {MAX_SEED}"),
    ({"seed": MAX_SEED + 1}, f"--seed {MAX_SEED + 1}: out of range"),
    ({"preset": "huge"}, "--preset huge: unknown preset; use one of tiny, qwen3-0.6b"),
])
def test_a_bad_value_is_one_line(change: dict, message: str) -> None:
    with pytest.raises(UserError) as caught:
        check_options(dataclasses.replace(TRACE_DEFAULTS, **change))
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)


def test_a_checkpoint_run_needs_no_known_preset() -> None:
    check_options(dataclasses.replace(TRACE_DEFAULTS, preset="huge", model=Path("ckpt")))


def test_the_module_imports_without_torch() -> None:
    """The CLI builds its parser and help from here on every command: torch must not come with it."""
    code = "import sys, annotate.trace.model.options; assert 'torch' not in sys.modules, 'torch imported'"
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
