"""A vendor update end to end on the real project's notes, lesson and site (issue 6's journey).

A real upstream git repository is built from the registry copy with edits committed on top;
`annotate vendor update` moves the pin; then `annotate check --strict` and the strict build show
what a maintainer sees: moved notes follow their lines, a rewritten statement stops the build
with the note and the lesson reference named.
"""
from __future__ import annotations

import re
import shutil
from pathlib import Path

from annotate.cli import main
from annotate.vendoring import read_lock
from annotate.vendoring.lock import LOCK_NAME, VENDOR_DIR
from vendor_helpers import commit_then_edit

pytest_plugins = ["site_fixtures"]

LAYERNORM = "nanovllm/layers/layernorm.py"
STATEMENT = "residual = x.to(orig_dtype)"


def upstream_with(project: Path, tmp_path: Path, edit) -> tuple[Path, str]:
    """A git repo holding the project's vendored files, plus one commit applying ``edit``."""
    repo = tmp_path / "upstream"
    shutil.copytree(project / VENDOR_DIR, repo, ignore=shutil.ignore_patterns("__pycache__"))
    return repo, commit_then_edit(repo, repo / LAYERNORM, edit, "edit layernorm")


def insert_comment_lines(path: Path) -> None:
    text = path.read_text()
    path.write_text(text.replace("class RMSNorm(", "# one\n# two\n# three\nclass RMSNorm(", 1))


def rewrite_statement(path: Path) -> None:
    path.write_text(path.read_text().replace(STATEMENT, "residual = x.to(dtype=orig_dtype)", 1))


def update(project: Path, repo: Path, rev: str) -> int:
    return main(["--root", str(project), "vendor", "update", "--git", str(repo), "--rev", rev,
                 "--repo-url", "https://example.invalid/nano-vllm"])


def test_inserted_lines_move_notes_and_permalinks_and_the_build_passes(project: Path, tmp_path: Path,
                                                                       capsys) -> None:
    repo, rev = upstream_with(project, tmp_path, insert_comment_lines)
    assert update(project, repo, rev) == 0
    report = capsys.readouterr().out
    assert re.search(r"moved\s+nanovllm/layers/layernorm.py: RMSNorm.add_rms_forward › 'residual = x.to\(orig_dtype\)'", report)
    assert "36 → 39" in report
    assert read_lock(project / LOCK_NAME).upstream.commit == rev
    assert main(["--root", str(project), "check", "--strict", "--no-math"]) == 0
    capsys.readouterr()
    site = tmp_path / "site"
    assert main(["--root", str(project), "build", "--site-dir", str(site)]) == 0
    page = (site / "source" / f"{LAYERNORM}.html").read_text(encoding="utf-8")
    assert f"https://example.invalid/nano-vllm/blob/{rev}/{LAYERNORM}#L39" in page
    lesson = (site / "lesson.html").read_text(encoding="utf-8")
    # the lesson's whole-symbol reference to add_rms_forward (28–40 before) follows the three new lines
    assert f"{LAYERNORM}.html#L31-L43" in lesson and f"{LAYERNORM}.html#L28-L40" not in lesson


def test_rewritten_statement_is_reported_and_the_strict_build_refuses(project: Path, tmp_path: Path,
                                                                      capsys) -> None:
    repo, rev = upstream_with(project, tmp_path, rewrite_statement)
    assert update(project, repo, rev) == 0
    report = capsys.readouterr().out
    assert "changed" in report and "residual = x.to(dtype=orig_dtype)" in report
    assert main(["--root", str(project), "check", "--strict", "--no-math"]) == 1
    check = capsys.readouterr().out
    assert re.search(r"notes/nanovllm/layers/layernorm\.py\.yml: note \d+", check)
    assert re.search(r"docs/\S+\.md:\d+", check), "the prose reference to the statement is listed too"
    site = tmp_path / "site"
    assert main(["--root", str(project), "build", "--site-dir", str(site)]) == 2
    error = capsys.readouterr().err
    assert "layernorm.py.yml" in error and STATEMENT in error
    assert not site.exists(), "nothing is published while a note is changed"
