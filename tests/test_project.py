"""The project's layout (annotate.project): docs_dir/site_dir read from mkdocs.yml as MkDocs reads them,
the hand-written pages listed as the build lists them, and `annotate check` and `annotate build`
reading the same folder (a project whose mkdocs.yml says ``docs_dir: pages``)."""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from mkdocs.config import load_config
from mkdocs.config.defaults import MkDocsConfig

from annotate.cli import main
from annotate.errors import UserError
from annotate.project import DOCS_FOLDER, SITE_FOLDER, Project, project_inputs

pytest_plugins = ["site_fixtures"]

BROKEN = "[[layernorm.py › RMSNorm.forward › return 42]]"


def _root(tmp_path: Path, config: str, *folders: str) -> Path:
    root = tmp_path / "p"
    root.mkdir()
    (root / "mkdocs.yml").write_text(config, encoding="utf-8")
    for name in folders:
        (root / name).mkdir(parents=True)
    return root


def _one_error(capsys: pytest.CaptureFixture[str]) -> str:
    captured = capsys.readouterr()
    lines = [ln for ln in captured.err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("annotate: error:"), captured.err
    assert "Traceback" not in captured.err
    return lines[0]


def test_the_defaults_are_mkdocs_own() -> None:
    assert DOCS_FOLDER == MkDocsConfig.docs_dir.default
    assert SITE_FOLDER == MkDocsConfig.site_dir.default


def test_docs_and_site_dir_are_read_relative_to_the_config(tmp_path: Path) -> None:
    root = _root(tmp_path, "site_name: t\ndocs_dir: pages\nsite_dir: out/web\n", "pages")
    project = Project.load(root)
    assert project.docs_dir == root.resolve() / "pages" and project.docs_label == "pages"
    assert project.site_dir == root.resolve() / "out/web"
    assert project.watched == tuple(root.resolve() / f for f in ("vendor", "notes", "traces", "map", "experiments"))
    assert project.inputs[0] == "pages" and "docs" not in project.inputs
    assert project_inputs(root) == project.inputs


def test_the_output_guard_protects_the_configured_docs_dir(tmp_path: Path) -> None:
    from annotate.guard import refuse_unsafe_output

    root = _root(tmp_path, "site_name: t\ndocs_dir: pages\n", "pages", "map")
    for folder in ("pages", "pages/sub", "map"):
        with pytest.raises(UserError, match=f"is or holds the project's input {folder.split('/')[0]}/"):
            refuse_unsafe_output(root, root / folder, "--site-dir")
    refuse_unsafe_output(root, root / "docs", "--site-dir")  # not an input of this project: a new folder is fine


def test_absent_settings_mean_mkdocs_defaults(tmp_path: Path) -> None:
    root = _root(tmp_path, "site_name: t\n", "docs")
    project = Project.load(root)
    assert (project.docs_label, project.rel(project.site_dir)) == ("docs", "site")


def test_python_name_tags_are_read_like_mkdocs_does(tmp_path: Path) -> None:
    """mkdocs.yml may carry ``!!python/name:`` tags (Material's emoji index); a plain safe loader refuses them."""
    root = _root(tmp_path, "site_name: t\ndocs_dir: pages\nmarkdown_extensions:\n  - pymdownx.emoji:\n"
                 "      emoji_index: !!python/name:material.extensions.emoji.twemoji\n", "pages")
    assert Project.load(root).docs_label == "pages"


def test_without_mkdocs_the_layout_is_still_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The GPU image runs `annotate trace` (whose output guard reads the layout) without MkDocs installed."""
    root = _root(tmp_path, "site_name: t\ndocs_dir: pages\nextra:\n  key: !ENV [NOPE, x]\nmarkdown_extensions:\n"
                 "  - pymdownx.emoji:\n      emoji_index: !!python/name:nowhere.at.all\n", "pages")
    monkeypatch.setitem(sys.modules, "mkdocs.utils.yaml", None)  # `import` of it now raises ImportError
    assert Project.load(root).docs_label == "pages"
    (root / "mkdocs.yml").write_text("site_name: [t\n", encoding="utf-8")
    with pytest.raises(UserError, match="mkdocs.yml: cannot be read"):
        Project.load(root)


def test_from_config_agrees_with_load(project: Path) -> None:
    config = load_config(str(project / "mkdocs.yml"))
    assert Project.from_config(config, project) == Project.load(project)


def test_pages_are_listed_as_mkdocs_lists_them(tmp_path: Path) -> None:
    """exclude_docs and README-beside-index are MkDocs' rules: check must not read what the build skips."""
    root = _root(tmp_path, "site_name: t\ndocs_dir: pages\nexclude_docs: |\n  drafts/\n", "pages/drafts", "pages/sub")
    for name in ("index.md", "README.md", "drafts/wip.md", "sub/a.md", "style.css"):
        (root / "pages" / name).write_text("# x\n", encoding="utf-8")
    assert [p.uri for p in Project.load(root).pages()] == ["index.md", "sub/a.md"]


@pytest.mark.parametrize("config, needle", [
    ("site_name: t\ndocs_dir: nowhere\n", "docs_dir 'nowhere' is not a folder"),
    ("site_name: t\ndocs_dir: [a, b]\n", "docs_dir is ['a', 'b'], not a folder name"),
    ("site_name: t\nsite_dir: 3\n", "site_dir is 3, not a folder name"),
    ("site_name: t\ndocs_dir: .\n", "holds the config file itself"),
    ("site_name: [t\n", "cannot be read"),
    ("- just\n- a list\n", "expected a mapping of settings"),
])
def test_a_bad_config_is_one_line_naming_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                   config: str, needle: str) -> None:
    root = _root(tmp_path, config, "docs")
    with pytest.raises(UserError, match="mkdocs.yml"):
        Project.load(root)
    for command in (["check", "--no-math", "--no-claims"], ["build", "--site-dir", str(tmp_path / "site")]):
        assert main(["--root", str(root), *command]) == 2
        line = _one_error(capsys)
        assert str(root / "mkdocs.yml") in line and needle in line, line
    assert not (tmp_path / "site").exists()


def test_a_null_docs_dir_is_named_by_the_default_it_means(tmp_path: Path) -> None:
    """``docs_dir: ~`` means MkDocs' default; when that folder is missing the message names it, not None."""
    root = _root(tmp_path, "site_name: t\ndocs_dir: ~\n")
    with pytest.raises(UserError, match=f"docs_dir '{DOCS_FOLDER}' is not a folder"):
        Project.load(root)


def test_a_missing_config_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--root", str(tmp_path), "check", "--no-math", "--no-claims"]) == 2
    assert "mkdocs.yml: missing; restore it with `git checkout -- mkdocs.yml`" in _one_error(capsys)


def _pages_project(project: Path) -> Path:
    """The real project with its hand-written pages moved to pages/ (and mkdocs.yml saying so)."""
    shutil.move(str(project / "docs"), str(project / "pages"))
    config = project / "mkdocs.yml"
    text = config.read_text(encoding="utf-8")
    assert "docs_dir: docs\n" in text
    config.write_text(text.replace("docs_dir: docs\n", "docs_dir: pages\n"), encoding="utf-8")
    return project


def test_check_and_build_read_the_configured_docs_dir(project: Path, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    root = _pages_project(project)
    (root / "pages/extra.md").write_text(f"# Extra\n\nsee {BROKEN}\n\n{{{{= nope.claim }}}}\n", encoding="utf-8")
    assert main(["--root", str(root), "check", "--strict", "--no-math"]) == 1
    out = capsys.readouterr().out
    assert "pages/extra.md:3: nanovllm/layers/layernorm.py" in out and "docs/extra.md" not in out
    assert "claim  pages/extra.md:5: unknown claim nope.claim" in out
    assert "pages/index.md:" in out  # the real pages' references were read from pages/ too

    assert main(["--root", str(root), "build", "--site-dir", str(tmp_path / "site")]) == 2
    err = capsys.readouterr().err
    assert f"pages/extra.md:3: reference {BROKEN} does not resolve" in err and "docs/extra.md" not in err
    assert not (tmp_path / "site").exists()


def test_check_and_build_agree_on_a_clean_pages_project(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Without the broken page both pass: the build found every page check found, under pages/."""
    root = _pages_project(project)
    assert main(["--root", str(root), "check", "--strict", "--no-math", "--no-claims"]) == 0
    checked = {line.split(":", 1)[0] for line in capsys.readouterr().out.splitlines() if line.startswith("pages/")}
    assert main(["--root", str(root), "build"]) == 0
    assert (root / "site" / "lesson.html").is_file()  # mkdocs.yml's site_dir, the default output
    assert checked and all((root / page).is_file() for page in checked)


@pytest.mark.parametrize("line, needle", [
    ("{{value layernorm.py › RMSNorm.forward › return 42 › x › 0}}", "pages/extra.md:3:"),
    ("{{diagram nope}}", "pages/extra.md: unknown diagram 'nope'"),
])
def test_build_messages_name_the_configured_docs_dir(project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                     line: str, needle: str) -> None:
    """Recorded values ({{value …}}) and diagrams fail the build naming the page under pages/, not docs/."""
    root = _pages_project(project)
    (root / "pages/extra.md").write_text(f"# Extra\n\n{line}\n", encoding="utf-8")
    assert main(["--root", str(root), "build", "--site-dir", str(tmp_path / "site")]) == 2
    errors = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("annotate: error:")]
    assert len(errors) == 1 and needle in errors[0] and "docs/" not in errors[0], errors
    assert not (tmp_path / "site").exists()
