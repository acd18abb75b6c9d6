"""annotate.atomic: the one stage-then-rename recipe, its staging names (which the guard sweeps) and the
modes what lands gets (those of an ordinary write, not mkstemp's 0600 / mkdtemp's 0700)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from annotate import atomic, guard


def ordinary_modes(tmp_path: Path) -> tuple[int, int]:
    """(file, folder) modes a plain open()/mkdir() gives under this process's umask."""
    (tmp_path / "plain-file").write_bytes(b"")
    (tmp_path / "plain-dir").mkdir()
    modes = ((tmp_path / "plain-file").stat().st_mode & 0o777, (tmp_path / "plain-dir").stat().st_mode & 0o777)
    (tmp_path / "plain-file").unlink()
    (tmp_path / "plain-dir").rmdir()
    return modes


def test_a_written_file_has_an_ordinary_mode_and_no_temp_is_left(tmp_path: Path) -> None:
    file_mode, _ = ordinary_modes(tmp_path)
    target = tmp_path / "a" / "lock.json"
    atomic.atomic_write_text(target, "{}\n")
    assert target.read_text() == "{}\n" and target.stat().st_mode & 0o777 == file_mode == atomic.FILE_MODE
    assert os.listdir(target.parent) == ["lock.json"]


def test_replace_dir_swaps_in_a_folder_with_an_ordinary_mode(tmp_path: Path) -> None:
    _, dir_mode = ordinary_modes(tmp_path)
    target = tmp_path / "out"
    target.mkdir()
    (target / "old.txt").write_text("old")
    with atomic.replace_dir(target) as staged:
        assert staged.parent == tmp_path and staged.name.startswith(".out.new-")
        (staged / "new.txt").write_text("new")
    assert sorted(os.listdir(target)) == ["new.txt"] and target.stat().st_mode & 0o777 == dir_mode
    assert os.listdir(tmp_path) == ["out"]


def test_a_failing_block_leaves_the_target_untouched_and_nothing_beside_it(tmp_path: Path) -> None:
    target = tmp_path / "out"
    target.mkdir()
    (target / "old.txt").write_text("old")
    with pytest.raises(RuntimeError, match="half-way"):
        with atomic.replace_dir(target) as staged:
            (staged / "half.txt").write_text("half")
            raise RuntimeError("half-way")
    assert os.listdir(target) == ["old.txt"] and os.listdir(tmp_path) == ["out"]


def test_a_failing_then_puts_the_previous_folder_back(tmp_path: Path) -> None:
    target = tmp_path / "out"
    target.mkdir()
    (target / "old.txt").write_text("old")

    def then() -> None:
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left"):
        with atomic.replace_dir(target, then) as staged:
            (staged / "new.txt").write_text("new")
    assert os.listdir(target) == ["old.txt"] and os.listdir(tmp_path) == ["out"]


def test_every_staging_name_is_one_the_guard_sweeps(tmp_path: Path) -> None:
    """A killed run's staged file and folder, and a moved-aside old copy, all match STAGING."""
    target = tmp_path / "out"
    staged_file = atomic.stage_file(tmp_path / "out", b"half")
    staged_dir = tmp_path / (atomic.staging_prefix(target) + "x")
    staged_dir.mkdir()
    old = tmp_path / (atomic.staging_prefix(target, atomic.OLD) + "y")
    old.mkdir()
    names = {p.name for p in (staged_file, staged_dir, old)}
    assert all((m := atomic.STAGING.match(n)) and m.group("name") == "out" for n in names)
    done = guard.sweep(target)
    assert f"restored out from {old.name}" in done and os.listdir(tmp_path) == ["out"]
