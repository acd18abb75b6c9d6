"""`vendor sync`: materialise from the pinned wheel, verify, no-op when in place, restore hand edits."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from annotate.errors import UserError
from annotate.vendoring import read_lock, sync
from annotate.vendoring.sync import verify_all
from annotate.vendoring.lock import LOCK_NAME, VENDOR_DIR, sha256_bytes
from vendor_helpers import make_wheel

REPO = Path(__file__).resolve().parents[1]

pytest_plugins = ["vendor_fixtures"]


def snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_sync_materialises_the_pinned_wheel(lock_project: Path) -> None:
    result = sync(lock_project)
    vendor = lock_project / VENDOR_DIR
    lock = read_lock(lock_project / LOCK_NAME)
    assert result.changed and result.files == len(lock.source.files)
    assert (vendor / "LICENSE").is_file()
    assert (vendor / "nanovllm/layers/layernorm.py").read_text().startswith("import torch")
    for rel, sha in lock.source.files.items():
        assert sha256_bytes((vendor / rel).read_bytes()) == sha
    assert not [p for p in (lock_project / "vendor").iterdir() if p.name.startswith(".nano-vllm.")]


def test_second_sync_is_a_verified_no_op(lock_project: Path) -> None:
    sync(lock_project)
    again = sync(lock_project)
    assert not again.changed


def test_hand_edit_is_restored(lock_project: Path) -> None:
    sync(lock_project)
    target = lock_project / VENDOR_DIR / "nanovllm/layers/layernorm.py"
    original = target.read_bytes()
    target.write_text("# edited by hand\n")
    (lock_project / VENDOR_DIR / "nanovllm/extra.py").write_text("x = 1\n")
    result = sync(lock_project)
    assert result.changed and set(result.restored) == {"nanovllm/layers/layernorm.py", "nanovllm/extra.py"}
    assert target.read_bytes() == original
    assert not (lock_project / VENDOR_DIR / "nanovllm/extra.py").exists()


def test_a_symbolic_link_is_replaced_and_the_copy_then_verifies(lock_project: Path) -> None:
    """The strict build refuses a link in the vendored copy and says to run sync: sync must then fix it."""
    sync(lock_project)
    link = lock_project / VENDOR_DIR / "nanovllm/zz.py"
    link.symlink_to("/etc/passwd")
    with pytest.raises(UserError, match="is a symbolic link"):
        verify_all(lock_project)
    result = sync(lock_project)
    assert result.changed and result.restored == ("nanovllm/zz.py",)
    assert not link.is_symlink() and not link.exists()
    verify_all(lock_project)


def fake_wheel_project(lock_project: Path, members: dict[str, bytes], **lock_changes) -> Path:
    """Point the lock at a crafted wheel in the cache (no network needed)."""
    data = json.loads((lock_project / LOCK_NAME).read_text())
    data["source"].update(name="fake-pkg", version="1", files={})
    sha = make_wheel(lock_project / ".cache/wheels/fake_pkg-1-py3-none-any.whl", members)
    data["source"]["sha256"] = sha
    data["source"].update(lock_changes)
    (lock_project / LOCK_NAME).write_text(json.dumps(data))
    return lock_project


def test_source_missing_a_locked_file_changes_nothing(lock_project: Path) -> None:
    sync(lock_project)
    before = snapshot(lock_project / VENDOR_DIR)
    fake_wheel_project(lock_project, {"nanovllm/__init__.py": b"", "LICENSE": b"MIT"})
    lock_before = (lock_project / LOCK_NAME).read_bytes()
    with pytest.raises(UserError, match=r"lacks LICENSE|lacks nanovllm/"):
        sync(lock_project)
    assert snapshot(lock_project / VENDOR_DIR) == before
    assert (lock_project / LOCK_NAME).read_bytes() == lock_before


def test_artifact_hash_mismatch_changes_nothing(lock_project: Path) -> None:
    sync(lock_project)
    before = snapshot(lock_project / VENDOR_DIR)
    fake_wheel_project(lock_project, {"nanovllm/__init__.py": b""}, sha256="f" * 64)
    with pytest.raises(UserError, match="hash mismatch|could not download"):
        sync(lock_project)
    assert snapshot(lock_project / VENDOR_DIR) == before


def test_traversal_member_changes_nothing(lock_project: Path) -> None:
    sync(lock_project)
    before = snapshot(lock_project / VENDOR_DIR)
    fake_wheel_project(lock_project, {"nanovllm/__init__.py": b"", "../../escape.py": b"boom"})
    with pytest.raises(UserError, match="outside the target"):
        sync(lock_project)
    assert snapshot(lock_project / VENDOR_DIR) == before
    assert not (lock_project.parent / "escape.py").exists()


def test_source_that_changed_under_the_pin_is_refused(lock_project: Path) -> None:
    sync(lock_project)
    data = json.loads((lock_project / LOCK_NAME).read_text())
    data["source"]["files"]["nanovllm/llm.py"] = "0" * 64
    (lock_project / LOCK_NAME).write_text(json.dumps(data))
    (lock_project / VENDOR_DIR / "nanovllm/llm.py").unlink()
    with pytest.raises(UserError, match="does not match the sha256"):
        sync(lock_project)


def test_an_include_list_upstream_materialises_only_its_files(lock_project: Path) -> None:
    """HF transformers: the pinned wheel holds hundreds of files; only the one the lock includes is written."""
    from annotate.vendoring import Vendor, sync as sync_one

    hf = Vendor("transformers")
    shutil.copy2(REPO / hf.lock_name, lock_project / hf.lock_name)
    if not any((lock_project / ".cache/wheels").glob("transformers-4.57.6-*.whl")):
        pytest.skip("the pinned transformers wheel is not in .cache/wheels (run `annotate vendor sync` once)")
    result = sync_one(lock_project, upstream=hf)
    files = sorted(p.relative_to(lock_project / hf.dir).as_posix()
                   for p in (lock_project / hf.dir).rglob("*") if p.is_file() and p.name != ".annotate-output")
    assert result.changed and files == ["transformers/models/qwen3/modeling_qwen3.py"]
    assert sync_one(lock_project, upstream=hf).changed is False   # verified, nothing to do
    (lock_project / hf.dir / files[0]).write_text("edited\n")
    assert sync_one(lock_project, upstream=hf).restored == tuple(files)


def test_the_vendored_copy_is_readable_like_any_folder(lock_project: Path) -> None:
    """Staged with mkdtemp, it used to land as mode 0700 (only its writer could read it)."""
    from annotate.atomic import DIR_MODE, FILE_MODE

    sync(lock_project)
    vendor = lock_project / VENDOR_DIR
    assert vendor.stat().st_mode & 0o777 == DIR_MODE and (vendor / "LICENSE").stat().st_mode & 0o777 == FILE_MODE


def test_a_no_op_sync_opens_up_a_copy_an_older_version_left_as_0700(lock_project: Path) -> None:
    from annotate.atomic import DIR_MODE

    sync(lock_project)
    vendor = lock_project / VENDOR_DIR
    vendor.chmod(0o700)
    assert not sync(lock_project).changed and vendor.stat().st_mode & 0o777 == DIR_MODE
    vendor.chmod(0o750)                       # a mode the user chose stays
    sync(lock_project)
    assert vendor.stat().st_mode & 0o777 == 0o750


def test_a_staged_lock_a_killed_update_left_is_swept(lock_project: Path) -> None:
    from annotate.atomic import stage_file

    lock = lock_project / LOCK_NAME
    leftover = stage_file(lock, b"{half")
    older = lock.parent / f".{lock.name}.k3x_9qz0.tmp"   # how stage_file named it before 2026-12
    older.write_bytes(b"{half")
    sync(lock_project)
    assert not leftover.exists() and not older.exists() and read_lock(lock)


def test_vendor_sync_outside_a_project_says_so_and_leaves_nothing(tmp_path: Path, capsys) -> None:
    """Run in a folder that is no project, `vendor sync` left `.cache/` behind (the output lock's folder)
    and told the user to `git checkout` a lock that was never there."""
    from annotate.cli import main

    assert main(["--root", str(tmp_path), "vendor", "sync"]) == 2
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.startswith("annotate: error:")]
    assert len(lines) == 1 and "not the project root" in lines[0] and "--root" in lines[0], err
    assert "git checkout" not in lines[0] and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []
    # a folder with vendor/ but no lock gets past that check and takes the output lock: .cache/ goes again
    (tmp_path / "vendor").mkdir()
    assert main(["--root", str(tmp_path), "vendor", "sync"]) == 2
    assert "lock file missing" in capsys.readouterr().err
    assert [p.name for p in tmp_path.iterdir()] == ["vendor"]


#: what `vendor update`'s apply does (annotate.update._apply): stage the new lock, swap the new folder in,
#: then rename the lock; here the process is SIGKILLed at the instant between the two renames
KILLED_BETWEEN_THE_RENAMES = """
import os, signal, sys
from pathlib import Path
from annotate.atomic import stage_file
from annotate.vendoring.sync import stage
root = Path(sys.argv[1])
stage_file(root / "vendor/nano-vllm.lock.json", b'{"format": 1, "a new": "lock"}')
stage({"nanovllm/new.py": b"x = 1\\n"}, root / "vendor/nano-vllm", then=lambda: os.kill(os.getpid(), signal.SIGKILL))
"""


def test_an_update_killed_between_its_two_renames_is_rolled_back_by_the_next_run(lock_project: Path) -> None:
    """The new vendor/ stood beside the old lock, and the next run's sweep deleted the old copy; now the
    next writer (sync or update) puts the old folder back, so the folder and its lock agree again."""
    import os
    import signal
    import subprocess
    import sys

    sync(lock_project)
    before, lock_before = snapshot(lock_project / VENDOR_DIR), (lock_project / LOCK_NAME).read_bytes()
    repo = Path(__file__).resolve().parents[1]
    proc = subprocess.run([sys.executable, "-c", KILLED_BETWEEN_THE_RENAMES, str(lock_project)], cwd=repo,
                          capture_output=True, text=True, timeout=120, env=dict(os.environ, PYTHONPATH=str(repo)))
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    left = sorted(p.name for p in (lock_project / "vendor").iterdir())
    assert any(n.startswith(".nano-vllm.old-") for n in left) and any(n.startswith(".nano-vllm.lock.json.new-") for n in left)
    assert (lock_project / VENDOR_DIR / "nanovllm/new.py").is_file()      # the torn state: new folder, old lock
    result = sync(lock_project)
    assert not result.changed                                              # the old pair, verified as it was
    assert snapshot(lock_project / VENDOR_DIR) == before and (lock_project / LOCK_NAME).read_bytes() == lock_before
    assert sorted(p.name for p in (lock_project / "vendor").iterdir()) == sorted(
        n for n in left if not n.startswith(".nano-vllm."))
