"""`annotate check`: notes, prose references and computed claims in one report."""
from __future__ import annotations

import shutil
from pathlib import Path

from annotate.cli import main

REPO = Path(__file__).resolve().parents[1]


def test_check_is_clean_on_the_repository(capsys) -> None:
    assert main(["--root", str(REPO), "check", "--strict", "--no-math"]) == 0
    out = capsys.readouterr().out
    assert "computed claims: all hold" in out
    assert "changed" not in out.split("anchors:")[-1]


def test_check_strict_fails_on_a_claim_that_is_unknown(tmp_path: Path, capsys) -> None:
    root = tmp_path / "project"
    shutil.copytree(REPO / "vendor", root / "vendor", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO / "notes", root / "notes")
    (root / "docs").mkdir()
    (root / "mkdocs.yml").write_text("site_name: t\n")  # where the pages are (MkDocs' default docs_dir)
    (root / "docs" / "page.md").write_text("# Page\n\nThe count is {{= mlp.h1024_f3072.paramz }}.\n")
    assert main(["--root", str(root), "check", "--no-math"]) == 0
    assert main(["--root", str(root), "check", "--strict", "--no-math"]) == 1
    out = capsys.readouterr().out
    assert "page.md:3" in out and "mlp.h1024_f3072.paramz" in out
    assert "1 no longer hold" in out
