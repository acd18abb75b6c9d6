"""Random and mutated bytes fed to every reader of user files (hypothesis), so that bad input stays one line.

Each reader gets a scratch project holding one file: random bytes, or the project's real file with
a few bytes flipped, cut, inserted or the tail truncated. It must accept the file or refuse it with
one :class:`UserError` line (the CLI prints it as one line and exits 2), never another exception,
and write nothing. Bounded (max_examples, no deadline) so `make test` keeps its time; the trace
format's field-by-field property is in tests/test_schema.py.
"""
from __future__ import annotations

import hashlib
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from annotate.codec import read_text
from annotate.errors import UserError
from annotate.framework_map import load_map, map_anchors
from annotate.notes import load_file
from annotate.references import find_references
from annotate.trace.model.runtime import read_model_dir
from annotate.trace.format.store import load_trace
from annotate.vendoring.lock import read_lock
from values_fixtures import mini_dir, repo_files

REPO = Path(__file__).resolve().parents[1]
LAYERNORM = "nanovllm/layers/layernorm.py"


@dataclass(frozen=True)
class Reader:
    """One reader of a user file: where the file sits in a project, its real bytes, and the call that reads it."""

    rel: str
    seed: Callable[[], bytes]
    read: Callable[[Path], Any]


def _checkpoint_config() -> bytes:
    import json

    from annotate.trace.model.options import PRESETS
    from annotate.trace.model.runtime import preset_config

    return json.dumps(preset_config(PRESETS["tiny"], 2, "bfloat16")).encode()


READERS = {
    "lock": Reader("vendor/nano-vllm.lock.json", lambda: (REPO / "vendor/nano-vllm.lock.json").read_bytes(),
                   lambda root: read_lock(root / "vendor/nano-vllm.lock.json")),
    "notes": Reader(f"notes/{LAYERNORM}.yml", lambda: (REPO / f"notes/{LAYERNORM}.yml").read_bytes(),
                    lambda root: load_file(root, root / f"notes/{LAYERNORM}.yml", known={LAYERNORM})),
    "map": Reader("map/decoder-block.yml", lambda: (REPO / "map/decoder-block.yml").read_bytes(),
                  lambda root: (load_map(root), map_anchors(root))),
    "docs references": Reader("docs/lesson.md", lambda: (REPO / "docs/lesson.md").read_bytes(),
                              lambda root: find_references(read_text(root / "docs/lesson.md", "docs/lesson.md"),
                                                           "lesson.md", sorted(repo_files()))),
    "trace": Reader("traces/cuda/trace.json", lambda: (mini_dir("bf16") / "trace.json").read_bytes(),
                    lambda root: load_trace(root / "traces/cuda", REPO)),
    "--model config.json": Reader("ckpt/config.json", _checkpoint_config,
                                  lambda root: read_model_dir(root / "ckpt")),
}

_EDIT = st.tuples(st.sampled_from(["flip", "cut", "insert", "truncate"]), st.floats(0, 1), st.binary(min_size=1, max_size=8))


def _mutate(seed: bytes, edits: list[tuple[str, float, bytes]]) -> bytes:
    data = bytearray(seed)
    for kind, where, junk in edits:
        at = int(where * max(len(data) - 1, 0))
        if kind == "flip" and data:
            data[at] ^= junk[0] or 0xFF
        elif kind == "cut":
            del data[at:at + len(junk) * 4]
        elif kind == "insert":
            data[at:at] = junk
        else:
            del data[at:]
    return bytes(data)


def _contents(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
            for p in sorted(root.rglob("*"))}


def _one_line_or_accepted(reader: Reader, data: bytes) -> None:
    root = Path(tempfile.mkdtemp(prefix="annotate-bytes-"))
    try:
        path = root / reader.rel
        path.parent.mkdir(parents=True)
        path.write_bytes(data)
        if reader.rel.startswith("ckpt/"):
            (path.parent / "model.safetensors").write_bytes(b"")   # read_model_dir only asks that weights exist
        before = _contents(root)
        try:
            reader.read(root)
        except UserError as exc:
            assert str(exc).strip() and "\n" not in str(exc).strip(), str(exc)
        assert _contents(root) == before                         # a reader writes nothing
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.parametrize("name", list(READERS))
def test_the_real_file_is_read(name: str) -> None:
    """The seeds are valid: what the properties below mutate is a file the reader accepts."""
    reader = READERS[name]
    root = Path(tempfile.mkdtemp(prefix="annotate-bytes-"))
    try:
        (root / reader.rel).parent.mkdir(parents=True)
        (root / reader.rel).write_bytes(reader.seed())
        (root / reader.rel).with_name("model.safetensors").write_bytes(b"")
        reader.read(root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.parametrize("name", list(READERS))
@settings(max_examples=25, deadline=None, database=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.binary(max_size=4096))
def test_random_bytes_are_one_line_or_accepted(name: str, data: bytes) -> None:
    _one_line_or_accepted(READERS[name], data)


@pytest.mark.parametrize("name", list(READERS))
@settings(max_examples=40, deadline=None, database=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(edits=st.lists(_EDIT, min_size=1, max_size=4))
def test_mutated_real_files_are_one_line_or_accepted(name: str, edits: list[tuple[str, float, bytes]]) -> None:
    reader = READERS[name]
    _one_line_or_accepted(reader, _mutate(reader.seed(), edits))
