"""Sources: the pinned wheel is verified before it is read; unsafe members and bad revs are refused."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from annotate.errors import UserError
from annotate.vendoring.sources import check_member, read_git, wheel_files
from vendor_helpers import git, make_wheel

pytest_plugins = ["vendor_fixtures"]


def test_wheel_members_are_mapped(tmp_path: Path) -> None:
    sha = make_wheel(tmp_path / "w.whl", {
        "nanovllm/__init__.py": b"x = 1\n",
        "nanovllm/layers/a.py": b"y = 2\n",
        "pkg-1.dist-info/licenses/LICENSE": b"MIT\n",
        "pkg-1.dist-info/METADATA": b"meta\n",
        "other/file.py": b"ignored\n",
    })
    files = wheel_files(tmp_path / "w.whl", sha)
    assert files == {"nanovllm/__init__.py": b"x = 1\n", "nanovllm/layers/a.py": b"y = 2\n", "LICENSE": b"MIT\n"}


def test_wheel_hash_checked_before_reading(tmp_path: Path) -> None:
    make_wheel(tmp_path / "w.whl", {"nanovllm/__init__.py": b""})
    with pytest.raises(UserError, match="artifact hash mismatch"):
        wheel_files(tmp_path / "w.whl", "0" * 64)


@pytest.mark.parametrize("name", ["../evil.py", "nanovllm/../../evil.py", "/etc/evil.py", "C:\\evil.py"])
def test_members_escaping_the_target_are_refused(tmp_path: Path, name: str) -> None:
    sha = make_wheel(tmp_path / "w.whl", {"nanovllm/__init__.py": b"", name: b"boom"})
    with pytest.raises(UserError, match="outside the target"):
        wheel_files(tmp_path / "w.whl", sha)


def test_link_members_are_refused(tmp_path: Path) -> None:
    sha = make_wheel(tmp_path / "w.whl", {"nanovllm/__init__.py": b""}, links=("nanovllm/link.py",))
    with pytest.raises(UserError, match="symbolic link"):
        wheel_files(tmp_path / "w.whl", sha)


def test_check_member_accepts_ordinary_names() -> None:
    check_member("nanovllm/models/qwen3.py", "w.whl")


def test_git_source_reads_committed_objects(upstream_repo: Path) -> None:
    head = git(upstream_repo, "rev-parse", "HEAD")
    (upstream_repo / "nanovllm" / "layers" / "layernorm.py").write_text("edited in the work tree\n")
    got = read_git(str(upstream_repo), head)
    assert got.commit == head and got.subject == "registry copy"
    assert "nanovllm/models/qwen3.py" in got.files and "LICENSE" in got.files
    assert got.files["nanovllm/layers/layernorm.py"].startswith(b"import torch")


def test_git_short_rev_and_branch_resolve_to_full_commit(upstream_repo: Path) -> None:
    head = git(upstream_repo, "rev-parse", "HEAD")
    assert read_git(str(upstream_repo), head[:8]).commit == head
    assert read_git(str(upstream_repo), "main").commit == head


def test_git_rev_that_does_not_exist(upstream_repo: Path) -> None:
    with pytest.raises(UserError, match="revision 'deadbeef' does not exist"):
        read_git(str(upstream_repo), "deadbeef")


def test_git_dirty_checkout_refused_when_asked(upstream_repo: Path) -> None:
    (upstream_repo / "nanovllm" / "llm.py").write_text("dirty\n")
    with pytest.raises(UserError, match="uncommitted changes"):
        read_git(str(upstream_repo), "HEAD", allow_dirty=False)


def test_git_symlink_member_refused(upstream_repo: Path) -> None:
    os.symlink("/etc/passwd", upstream_repo / "nanovllm" / "evil.py")
    git(upstream_repo, "add", "-A")
    git(upstream_repo, "commit", "-q", "-m", "link")
    with pytest.raises(UserError, match="symbolic link"):
        read_git(str(upstream_repo), "HEAD")


def test_not_a_git_repository(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="does not exist|not a git"):
        read_git(str(tmp_path), "HEAD")
