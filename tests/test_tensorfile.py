"""annotate.trace.format.tensorfile: a safetensors write that fails is one line with the operating system's words."""
from __future__ import annotations

import errno
from pathlib import Path

import pytest
import torch

from annotate.errors import UserError
from annotate.trace.format.tensorfile import io_reason, save_tensors

FULL = 'Error while serializing: IoError(Os { code: 28, kind: StorageFull, message: "No space left on device" })'


def test_a_tensor_file_is_written(tmp_path: Path) -> None:
    from safetensors.torch import load_file

    save_tensors(tmp_path / "t.safetensors", {"a": torch.arange(3.0)}, "--out x", "kept")
    assert load_file(tmp_path / "t.safetensors")["a"].tolist() == [0.0, 1.0, 2.0]


def test_a_full_disk_is_one_line_naming_the_file_and_the_reason(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import safetensors.torch
    from safetensors import SafetensorError

    def full(*args, **kwargs) -> None:
        raise SafetensorError(FULL)

    monkeypatch.setattr(safetensors.torch, "save_file", full)
    with pytest.raises(UserError) as info:
        save_tensors(tmp_path / "tensors.safetensors", {"a": torch.zeros(1)}, "--out traces/cpu", "the previous trace is kept")
    assert str(info.value) == ("--out traces/cpu: cannot write tensors.safetensors (No space left on device); free space "
                               "(or make it writable) and run again; the previous trace is kept")


def test_the_reason_is_the_operating_systems_words() -> None:
    from safetensors import SafetensorError

    assert io_reason(SafetensorError(FULL)) == "No space left on device"
    assert io_reason(OSError(errno.EROFS, "Read-only file system")) == "Read-only file system"
    assert io_reason(SafetensorError("header too large\nmore")) == "header too large"
