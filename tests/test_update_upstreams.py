"""`vendor update --upstream transformers` in a scratch project with a real git repository laid out
like HF's (``src/transformers/…``): the map follows a moved statement; a rewritten one stops the
strict build, named; nano-vllm's lock and notes are left alone."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from annotate.cli import main
from annotate.errors import UserError
from annotate.pages.base.snapshot import build_snapshot
from annotate.framework_map import load_map
from annotate.pages.lesson.map_page import render_map
from annotate.vendoring import read_lock
from vendor_helpers import commit_then_edit

pytest_plugins = ["site_fixtures"]

HF = "transformers/models/qwen3/modeling_qwen3.py"
LOCK = "vendor/transformers.lock.json"
X1 = "        hidden_states = residual + hidden_states\n"


def hf_repo(project: Path, tmp_path: Path, edit) -> tuple[Path, str]:
    """A git repo with the vendored HF file at src/…, one commit as vendored, one applying ``edit``."""
    repo = tmp_path / "transformers"
    target = repo / "src" / HF
    target.parent.mkdir(parents=True)
    target.write_bytes((project / "vendor/transformers" / HF).read_bytes())
    return repo, commit_then_edit(repo, target, edit, "edit the decoder layer")


def two_lines_above_the_layer(path: Path) -> None:
    text = path.read_text()
    path.write_text(text.replace("class Qwen3DecoderLayer(", "# one\n# two\nclass Qwen3DecoderLayer(", 1))


def rewrite_x1(path: Path) -> None:
    text = path.read_text()
    assert X1 in text
    path.write_text(text.replace(X1, "        hidden_states = hidden_states + residual\n", 1))


def update(project: Path, repo: Path, rev: str, capsys) -> str:
    assert main(["--root", str(project), "vendor", "update", "--upstream", "transformers", "--git", str(repo),
                 "--rev", rev, "--repo-url", "https://example.invalid/transformers"]) == 0
    return capsys.readouterr().out


def x1_cell(project: Path) -> str:
    html = render_map(load_map(project), build_snapshot(project)).markdown
    row = re.search(r'<tr id="step-x1-and-norm">.*?</tr>', html).group(0)
    return re.search(r'<td data-framework="transformers">.*?</td>', row).group(0)


def test_moved_statement_the_map_follows(project: Path, tmp_path: Path, capsys) -> None:
    nano_lock = (project / "vendor/nano-vllm.lock.json").read_bytes()
    assert f"{HF}.html#L270" in x1_cell(project)
    repo, rev = hf_repo(project, tmp_path, two_lines_above_the_layer)
    out = update(project, repo, rev, capsys)
    assert "anchors:" in out and "moved" in out and "0 changed, 0 vanished" in out
    assert re.search(r"moved\s+transformers/models/qwen3/modeling_qwen3\.py: Qwen3DecoderLayer\.forward", out)
    assert "nanovllm/" not in out.split("anchors:")[1]          # only this upstream's anchors are reported
    lock = read_lock(project / LOCK)
    assert lock.upstream.commit == rev and lock.upstream.tag == "" and lock.source.subdir == "src/"
    cell = x1_cell(project)
    assert f"{HF}.html#L272" in cell and f"https://example.invalid/transformers/blob/{rev}/src/{HF}#L272" in cell
    assert (project / "vendor/nano-vllm.lock.json").read_bytes() == nano_lock
    assert main(["--root", str(project), "vendor", "sync"]) == 0   # the git-sourced lock syncs (no-op, verified)


def test_rewritten_statement_fails_the_strict_build(project: Path, tmp_path: Path, capsys) -> None:
    from annotate.cli.site import build_site

    repo, rev = hf_repo(project, tmp_path, rewrite_x1)
    out = update(project, repo, rev, capsys)
    assert re.search(r"changed\s+transformers/models/qwen3/modeling_qwen3\.py: Qwen3DecoderLayer\.forward › "
                     r"'hidden_states = residual \+ hidden_states'", out)
    assert "notes/transformers/models/qwen3/modeling_qwen3.py.yml" in out and "map/decoder-block.yml" in out
    with pytest.raises(UserError, match=r"hidden_states = residual \+ hidden_states"):
        build_site(project, project / "site", strict=True)
    assert not (project / "site").exists()


def test_unknown_upstream_is_one_line(project: Path, capsys) -> None:
    assert main(["--root", str(project), "vendor", "update", "--upstream", "tensorflow", "--git", ".",
                 "--rev", "HEAD"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--upstream 'tensorflow'" in err[0] and "nano-vllm, transformers, vllm" in err[0]
