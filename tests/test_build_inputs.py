"""annotate.build_inputs and `annotate build`'s no-op: a strict build with unchanged inputs keeps the site it
made; any input that changes (a page, a note, a trace, a vendored file) makes it build again."""
from __future__ import annotations

from pathlib import Path

import pytest

from annotate.build_inputs import SITE_STAMP, inputs_digest, read_stamp
from annotate.cli import main
from annotate.project import Project


@pytest.fixture
def small_project(tmp_path: Path) -> Path:
    """A real MkDocs project of one page (no plugin: a build takes a second), with the input folders."""
    root = tmp_path / "project"
    (root / "docs").mkdir(parents=True)
    (root / "mkdocs.yml").write_text("site_name: t\n", encoding="utf-8")
    (root / "docs" / "index.md").write_text("# 页 Page\n", encoding="utf-8")
    for folder in ("notes", "traces/cpu", "vendor/up"):
        (root / folder).mkdir(parents=True)
    (root / "notes" / "a.py.yml").write_text("notes: []\n", encoding="utf-8")
    (root / "traces" / "cpu" / "trace.json").write_text("{}\n", encoding="utf-8")
    (root / "vendor" / "up" / "a.py").write_text("x = 1\n", encoding="utf-8")
    return root


def _build(root: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> str:
    assert main(["--root", str(root), "build", *extra]) == 0
    captured = capsys.readouterr()
    return captured.out + captured.err


@pytest.mark.parametrize("edit", ["docs/index.md", "notes/a.py.yml", "traces/cpu/trace.json", "vendor/up/a.py",
                                  "mkdocs.yml"])
def test_a_build_with_unchanged_inputs_keeps_the_site_and_an_edit_rebuilds(
        small_project: Path, capsys: pytest.CaptureFixture[str], edit: str) -> None:
    site = small_project / "site"
    _build(small_project, capsys)
    stamp = read_stamp(site)
    assert stamp == inputs_digest(Project.load(small_project))
    page = site / "index.html"
    first = page.stat().st_mtime_ns
    assert "up to date" in _build(small_project, capsys)
    assert page.stat().st_mtime_ns == first                       # nothing rebuilt
    with open(small_project / edit, "a", encoding="utf-8") as fd:
        fd.write("\n# changed\n")
    assert "up to date" not in _build(small_project, capsys)
    assert page.stat().st_mtime_ns != first and read_stamp(site) not in (None, stamp)


def test_force_and_a_lenient_build_never_count_as_the_strict_one(small_project: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    site = small_project / "site"
    _build(small_project, capsys, "--no-strict")
    assert read_stamp(site) is None                                # a lenient build leaves no stamp
    assert "up to date" not in _build(small_project, capsys)       # so the strict one builds
    assert "up to date" not in _build(small_project, capsys, "--force")


def test_hidden_entries_are_not_inputs(small_project: Path) -> None:
    """Staging folders of an interrupted swap, locks and editors' files are never read by a build."""
    before = inputs_digest(Project.load(small_project))
    (small_project / "traces" / ".cpu.new-1").mkdir()
    (small_project / "traces" / ".cpu.new-1" / "trace.json").write_text("{}", encoding="utf-8")
    (small_project / "docs" / ".index.md.swp").write_text("x", encoding="utf-8")
    assert inputs_digest(Project.load(small_project)) == before
    assert SITE_STAMP.startswith(".")                              # MkDocs never publishes it as a page
