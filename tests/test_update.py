"""`annotate vendor update` on real git repositories built in temp dirs from the registry copy.

The first commit of the test repository is the registry copy (vendor/nano-vllm as `vendor sync`
materialised it); each scenario is one commit on top of it: lines inserted above a symbol, a
statement rewritten, a symbol deleted, a new file, LICENSE removed.
"""
from __future__ import annotations

import json
import importlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from annotate import update, vendoring
from annotate.anchors import Anchor
from annotate.cli import main
from annotate.errors import UserError
from annotate.vendoring import linemap
from annotate.vendoring.lock import LOCK_NAME, VENDOR_DIR, UpstreamFile, read_lock
from annotate.vendoring.sync import local_hashes

REPO = Path(__file__).resolve().parents[1]
# the module (the package re-exports a function of the same name as `annotate.vendoring.sync`)
sync_module = importlib.import_module("annotate.vendoring.sync")
REGISTRY_COPY = REPO / VENDOR_DIR
LAYERNORM = "nanovllm/layers/layernorm.py"
ACTIVATION = "nanovllm/layers/activation.py"
NOTES = """\
notes:
  - symbol: RMSNorm.add_rms_forward
    statement: "residual = x.to(orig_dtype)"
    math: 'r = \\mathrm{{bf16}}(x + r)'
    zh: 中文说明
    en: English note
  - symbol: RMSNorm.rms_forward
    statement: "var = x.pow(2).mean(dim=-1, keepdim=True)"
    math: 'v = \\mathrm{{mean}}(x^2)'
    zh: 均方
    en: mean square
"""
GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.invalid", "GIT_AUTHOR_DATE": "2026-01-02T03:04:05+00:00",
           "GIT_COMMITTER_DATE": "2026-01-02T03:04:05+00:00", "GIT_CONFIG_GLOBAL": os.devnull,
           "GIT_CONFIG_NOSYSTEM": "1"}

pytestmark = pytest.mark.skipif(not (REGISTRY_COPY / LAYERNORM).is_file(),
                                reason="vendor/nano-vllm is not materialised: run `annotate vendor sync`")


# --- fixtures: a real upstream repository and a small project -------------------------------------


def git(repo: Path, *args: str) -> str:
    run = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                         env={**os.environ, **GIT_ENV})
    assert run.returncode == 0, run.stderr
    return run.stdout.strip()


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def commit_on_base(repo: Path, branch: str, change, subject: str) -> str:
    git(repo, "checkout", "-q", "-b", branch, "base")
    change(repo)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", subject)
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture(scope="module")
def upstream(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """A git repository: the registry copy as the first commit, one branch per scenario on top."""
    repo = tmp_path_factory.mktemp("upstream") / "nano-vllm"
    shutil.copytree(REGISTRY_COPY, repo, ignore=shutil.ignore_patterns("__pycache__"))
    (repo / "README.md").write_text("a test copy\n")
    git(repo, "init", "-q", "-b", "base")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "registry copy")
    shas = {"base": git(repo, "rev-parse", "HEAD")}
    shas["insert"] = commit_on_base(repo, "insert", lambda r: edit(
        r / LAYERNORM, "    @torch.compile\n    def add_rms_forward(",
        "    # three new lines\n    # above the symbol\n\n    @torch.compile\n    def add_rms_forward("), "insert lines")
    shas["rewrite"] = commit_on_base(repo, "rewrite", lambda r: edit(
        r / LAYERNORM, "residual = x.to(orig_dtype)", "residual = x.to(dtype=orig_dtype)"), "rewrite a statement")
    shas["delete"] = commit_on_base(repo, "delete", lambda r: edit(
        r / LAYERNORM, (r / LAYERNORM).read_text().split("    @torch.compile\n")[1], ""), "delete rms_forward")
    shas["added"] = commit_on_base(repo, "added", lambda r: (r / "nanovllm/layers/extra.py").write_text(
        "def extra():\n    return 1\n"), "add a file")
    shas["nolicense"] = commit_on_base(repo, "nolicense", lambda r: (r / "LICENSE").unlink(), "drop LICENSE")
    git(repo, "checkout", "-q", "base")
    return repo, shas


@pytest.fixture
def project(tmp_path) -> Path:
    """A minimal project: the committed lock, the materialised registry copy, one notes file."""
    root = tmp_path / "project"
    (root / "vendor").mkdir(parents=True)
    shutil.copy2(REPO / LOCK_NAME, root / LOCK_NAME)
    shutil.copytree(REGISTRY_COPY, root / VENDOR_DIR, ignore=shutil.ignore_patterns("__pycache__"))
    notes = root / "notes" / f"{LAYERNORM}.yml"
    notes.parent.mkdir(parents=True)
    notes.write_text(NOTES, encoding="utf-8")
    return root


def yaml_anchors(root: Path) -> list[Anchor]:
    """A stand-in for annotate.project_anchors.all_anchors: one anchor per note, path from the notes file name."""
    found = []
    for path in sorted((root / "notes").rglob("*.yml")):
        target = path.relative_to(root / "notes").as_posix()[: -len(".yml")]
        for n, note in enumerate(yaml.safe_load(path.read_text(encoding="utf-8"))["notes"], 1):
            found.append(Anchor(target, note.get("symbol"), note.get("statement"), int(note.get("nth", 0)),
                                origin=f"{path.relative_to(root).as_posix()}: note {n}"))
    return found


@pytest.fixture
def notes_module(project):
    """The CLI collects anchors with the real annotate.notes; it must see what this file's notes hold."""
    from annotate.project_anchors import all_anchors

    found = all_anchors(project)
    assert [(a.symbol, a.statement) for a in found] == [(a.symbol, a.statement) for a in yaml_anchors(project)]


def snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def by_state(plan: update.UpdatePlan) -> dict[str, str]:
    return {r.anchor.symbol: r.state for r in plan.anchors}


# --- planning and applying ------------------------------------------------------------------------


def test_update_to_base_recomputes_upstream_facts_and_pins_git_source(project, upstream):
    repo, shas = upstream
    plan = update.plan_update(project, str(repo), "base", anchors=yaml_anchors)
    assert plan.new.upstream.commit == shas["base"]
    assert plan.new.upstream.subject == "registry copy"
    assert plan.new.upstream.committed == "2026-01-02T03:04:05+00:00"
    assert plan.new.upstream.repo == read_lock(project / LOCK_NAME).upstream.repo  # a local path keeps the old base
    for rel, facts in plan.new.upstream.files.items():
        assert facts == UpstreamFile.of((repo / rel).read_bytes())
    assert "README.md" not in plan.new.upstream.files
    assert plan.new.source.kind == "git" and plan.new.source.commit == shas["base"]
    assert by_state(plan) == {"RMSNorm.add_rms_forward": "unchanged", "RMSNorm.rms_forward": "unchanged"}
    update.apply_update(project, plan)
    lock = read_lock(project / LOCK_NAME)
    assert lock == plan.new
    assert local_hashes(project / VENDOR_DIR) == lock.source.files
    assert not vendoring.sync(project).changed  # lock and copy agree: sync is a verified no-op
    assert all(f.state == "identical" for f in vendoring.status(project, lock).files)
    (project / VENDOR_DIR / LAYERNORM).unlink()
    assert vendoring.sync(project).restored == (LAYERNORM,)  # the git source in the lock restores it
    assert (project / VENDOR_DIR / LAYERNORM).read_bytes() == (repo / LAYERNORM).read_bytes()


def test_update_from_a_url_clones_it(project, upstream):
    repo, shas = upstream
    url = repo.as_uri()  # file://…: the same path as a remote URL (bare clone into a temp dir)
    plan = update.plan_update(project, url, "insert", anchors=yaml_anchors)
    assert plan.new.source.url == url and plan.new.upstream.commit == shas["insert"]
    assert not any("local path" in w for w in plan.warnings)
    with pytest.raises(UserError, match="does not exist"):
        update.plan_update(project, url, "0" * 40, anchors=yaml_anchors)


def test_lines_inserted_above_symbol_move_anchors_and_permalinks_follow(project, upstream):
    repo, shas = upstream
    plan = update.plan_update(project, str(repo), shas["insert"], anchors=yaml_anchors)
    moved, same = plan.anchors
    assert (moved.state, moved.old_span, moved.new_span) == ("moved", (36, 36), (39, 39))
    assert (same.state, same.new_span) == ("unchanged", (23, 23))
    old_repo = plan.old.upstream.repo
    assert moved.old_permalink == f"{old_repo}/blob/{plan.old.upstream.commit}/{LAYERNORM}#L36"
    assert moved.new_permalink == f"{old_repo}/blob/{shas['insert']}/{LAYERNORM}#L39"
    assert [(c.path, c.state) for c in plan.file_changes if c.path == LAYERNORM] == [(LAYERNORM, "changed")]
    update.apply_update(project, plan)
    lock = read_lock(project / LOCK_NAME)
    lmap = linemap.build(LAYERNORM, (project / VENDOR_DIR / LAYERNORM).read_bytes(), lock.upstream)
    assert lmap.identical and lmap.upstream_line(39) == 39
    assert lock.upstream.permalink(LAYERNORM, lmap.upstream_line(39)) == moved.new_permalink
    assert "moved" in update.render(plan, applied=True) and "36 → 39" in update.render(plan, applied=True)


def test_rewritten_statement_is_reported_changed_with_candidates(project, upstream):
    repo, shas = upstream
    plan = update.plan_update(project, str(repo), shas["rewrite"], anchors=yaml_anchors)
    changed = plan.anchors[0]
    assert changed.state == "changed" and changed.new_span is None
    assert changed.candidates[0] == (36, "residual = x.to(dtype=orig_dtype)")
    assert [r.anchor.origin for r in plan.needs_fixing] == [f"notes/{LAYERNORM}.yml: note 1"]
    text = update.render(plan, applied=False)
    assert "L36: residual = x.to(dtype=orig_dtype)" in text and "annotate check" in text


def test_deleted_symbol_is_reported_vanished(project, upstream):
    repo, shas = upstream
    plan = update.plan_update(project, str(repo), shas["delete"], anchors=yaml_anchors)
    assert by_state(plan) == {"RMSNorm.add_rms_forward": "moved", "RMSNorm.rms_forward": "vanished"}
    assert "symbol 'RMSNorm.rms_forward' is gone" in update.render(plan, applied=False)


def test_new_file_is_reported_added(project, upstream):
    repo, shas = upstream
    plan = update.plan_update(project, str(repo), shas["added"], anchors=yaml_anchors)
    added = [c for c in plan.file_changes if c.state == "added"]
    assert [(c.path, c.new_lines) for c in added] == [("nanovllm/layers/extra.py", 2)]
    update.apply_update(project, plan)
    assert (project / VENDOR_DIR / "nanovllm/layers/extra.py").read_text() == "def extra():\n    return 1\n"


def test_second_update_git_to_git_reports_only_the_upstream_edit(project, upstream):
    repo, shas = upstream
    update.apply_update(project, update.plan_update(project, str(repo), "base", anchors=yaml_anchors))
    plan = update.plan_update(project, str(repo), "rewrite", anchors=yaml_anchors)
    assert [(c.path, c.state) for c in plan.file_changes] == [(LAYERNORM, "changed")]
    assert plan.old.source.kind == "git" and plan.old.source.commit == shas["base"]


def test_repo_url_sets_the_permalink_base(project, upstream):
    repo, shas = upstream
    plan = update.plan_update(project, str(repo), "insert", repo_url="https://example.invalid/me/nano-vllm.git",
                              anchors=yaml_anchors)
    assert plan.new.upstream.repo == "https://example.invalid/me/nano-vllm"
    assert plan.anchors[0].new_permalink.startswith(f"https://example.invalid/me/nano-vllm/blob/{shas['insert']}/")
    with pytest.raises(UserError, match="not an https:// web address"):
        update.plan_update(project, str(repo), "insert", repo_url="ftp:/x", anchors=yaml_anchors)
    assert update.permalink_base("https://h.invalid/a/b/", None, "old") == "https://h.invalid/a/b"
    assert update.permalink_base("git@h.invalid:a/b.git", None, "old") == "old"


@pytest.mark.parametrize("rev, pattern", [("0" * 40, "does not exist"), ("no-such-branch", "does not exist"),
                                          ("nolicense", "lacks LICENSE")])
def test_bad_rev_or_source_lacking_files_is_refused(project, upstream, rev, pattern):
    repo, _ = upstream
    before = snapshot(project)
    with pytest.raises(UserError, match=pattern):
        update.plan_update(project, str(repo), rev, anchors=yaml_anchors)
    assert snapshot(project) == before


def test_dirty_checkout_is_refused(project, upstream, tmp_path):
    repo, _ = upstream
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(repo), str(clone)], check=True, env={**os.environ, **GIT_ENV})
    (clone / LAYERNORM).write_text("# edited\n")
    with pytest.raises(UserError, match="uncommitted changes"):
        update.plan_update(project, str(clone), "HEAD", anchors=yaml_anchors)


def test_bare_repository_is_accepted(project, upstream, tmp_path):
    repo, shas = upstream
    bare = tmp_path / "mirror.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(repo), str(bare)], check=True, env={**os.environ, **GIT_ENV})
    assert update.plan_update(project, str(bare), "insert", anchors=yaml_anchors).new.upstream.commit == shas["insert"]


def test_not_a_repository_and_missing_folder_are_refused(project, tmp_path):
    with pytest.raises(UserError, match="not a git repository"):
        update.plan_update(project, str(tmp_path), "HEAD", anchors=yaml_anchors)
    with pytest.raises(UserError, match="no such folder"):
        update.plan_update(project, str(tmp_path / "nowhere"), "HEAD", anchors=yaml_anchors)


@pytest.mark.parametrize("module, where", [(sync_module, "write_file"), (update, "_stage_lock"),
                                           (update, "_commit_lock")])
def test_failure_at_any_step_leaves_vendor_and_lock_intact(project, upstream, monkeypatch, module, where):
    repo, _ = upstream
    plan = update.plan_update(project, str(repo), "insert", anchors=yaml_anchors)
    before = snapshot(project)
    real, calls = getattr(module, where), []

    def failing(*args, **kwargs):
        calls.append(args)
        if len(calls) == 3 or where != "write_file":
            raise OSError(f"injected failure in {where}")
        return real(*args, **kwargs)

    monkeypatch.setattr(module, where, failing)
    with pytest.raises(OSError, match="injected"):
        update.apply_update(project, plan)
    assert snapshot(project) == before  # same files, same bytes, no temp folder or temp lock left
    assert sorted(p.name for p in (project / "vendor").iterdir()) == ["nano-vllm", "nano-vllm.lock.json"]


def test_apply_refuses_a_lock_changed_since_planning(project, upstream):
    repo, _ = upstream
    plan = update.plan_update(project, str(repo), "insert", anchors=yaml_anchors)
    lock = project / LOCK_NAME
    lock.write_text(lock.read_text() + " ")
    before = snapshot(project)
    with pytest.raises(UserError, match="changed since"):
        update.apply_update(project, plan)
    assert snapshot(project) == before


EXPERIMENT = """\
title: {zh: 标题, en: Title}
hypothesis: {zh: 假设, en: Hypothesis}
edits:
  - file: nanovllm/layers/layernorm.py
    symbol: RMSNorm.rms_forward
    statement: x = x.float()
    replace: x = x.float().clone()
"""


def test_an_experiment_edit_whose_symbol_is_deleted_is_reported_vanished(project, upstream):
    """Experiment anchors follow a vendor update like notes: the real collector (annotate.project_anchors.all_anchors)
    lists them, and an edit of a deleted symbol is vanished, named by its experiment file and edit."""
    repo, shas = upstream
    (project / "experiments").mkdir()
    (project / "experiments" / "copy.yml").write_text(EXPERIMENT, encoding="utf-8")
    plan = update.plan_update(project, str(repo), shas["delete"])
    edit = [r for r in plan.anchors if r.anchor.origin == "experiments/copy.yml: edit 1"]
    assert [r.state for r in edit] == ["vanished"]
    assert "experiments/copy.yml: edit 1" in update.render(plan, applied=False)
    assert update.plan_update(project, str(repo), shas["insert"]).anchors[-1].state == "unchanged"


# --- the command line -----------------------------------------------------------------------------


def test_cli_dry_run_reports_and_writes_nothing(project, upstream, notes_module, capsys):
    repo, _ = upstream
    before = snapshot(project)
    rc = main(["--root", str(project), "vendor", "update", "--git", str(repo), "--rev", "rewrite", "--dry-run"])
    out, err = capsys.readouterr()
    assert rc == 0 and snapshot(project) == before
    assert "dry run: nothing was written" in out and "changed" in out and "RMSNorm.add_rms_forward" in out
    assert "[fetch]" in err and "[resolve]" in err and "[apply]" not in err


def test_cli_end_to_end_applies_and_reports_json(project, upstream, notes_module, capsys):
    repo, shas = upstream
    rc = main(["--root", str(project), "vendor", "update", "--git", str(repo), "--rev", "insert", "--json"])
    out, _ = capsys.readouterr()
    assert rc == 0
    report = json.loads(out)
    assert report["applied"] and report["to"]["commit"] == shas["insert"]
    moved = [a for a in report["anchors"] if a["state"] == "moved"]
    assert [(a["symbol"], a["old_span"], a["new_span"]) for a in moved] == [("RMSNorm.add_rms_forward", [36, 36], [39, 39])]
    assert main(["--root", str(project), "vendor", "status"]) == 0
    assert read_lock(project / LOCK_NAME).upstream.commit == shas["insert"]


@pytest.mark.parametrize("case, message", [("bad rev", "does not exist"), ("no LICENSE", "lacks LICENSE"),
                                           ("not a repo", "not a git repository"), ("dirty", "uncommitted changes")])
def test_cli_bad_input_is_one_line_and_nonzero(project, upstream, notes_module, capsys, tmp_path, case, message):
    repo, _ = upstream
    source, rev = str(repo), {"bad rev": "0" * 40, "no LICENSE": "nolicense"}.get(case, "HEAD")
    if case == "not a repo":
        source = str(tmp_path)
    elif case == "dirty":
        source = str(tmp_path / "clone")
        subprocess.run(["git", "clone", "-q", str(repo), source], check=True, env={**os.environ, **GIT_ENV})
        (Path(source) / LAYERNORM).write_text("# edited\n")
    before = snapshot(project)
    rc = main(["--root", str(project), "vendor", "update", "--git", source, "--rev", rev])
    _, err = capsys.readouterr()
    errors = [line for line in err.splitlines() if line.startswith("annotate: error:")]
    assert rc != 0 and len(errors) == 1 and message in errors[0]
    assert snapshot(project) == before


def test_console_script_dry_run(project, upstream):
    """The installed `annotate` command, as a user runs it (no notes module needed)."""
    repo, _ = upstream
    script = Path(sys.executable).with_name("annotate")
    if not script.exists():
        pytest.skip("the annotate console script is not installed next to this python")
    try:
        from annotate.project_anchors import all_anchors

        all_anchors(project)
    except ModuleNotFoundError:
        pass  # no notes module yet: the command warns and goes on
    except ImportError as exc:
        pytest.skip(f"annotate.notes is not usable yet ({exc})")
    before = snapshot(project)
    run = subprocess.run([str(script), "--root", str(project), "vendor", "update", "--git", str(repo),
                          "--rev", "delete", "--dry-run"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "dry run" in run.stdout and snapshot(project) == before


def test_an_http_repo_url_is_refused_by_the_dry_run_not_blamed_on_the_lock_by_the_apply(project, upstream, capsys):
    """`http://` passed the planner's own check, then the lock's reader refused the written lock's repo:
    `vendor/nano-vllm.lock.json: $.upstream.repo: expected an https:// URL`, as if the lock were broken."""
    from annotate.cli import main

    repo, _ = upstream
    lock = (project / "vendor/nano-vllm.lock.json").read_bytes()
    for apply in (["--dry-run"], []):
        rc = main(["--root", str(project), "vendor", "update", "--git", str(repo), "--rev", "insert",
                   "--repo-url", "http://example.invalid/me/nano-vllm", *apply])
        err = capsys.readouterr().err
        lines = [ln for ln in err.splitlines() if ln.startswith("annotate: error:")]
        assert rc != 0 and len(lines) == 1 and "Traceback" not in err, err
        assert "--repo-url 'http://example.invalid/me/nano-vllm': not an https:// web address" in lines[0]
        assert "lock.json" not in lines[0]
    assert (project / "vendor/nano-vllm.lock.json").read_bytes() == lock
    with pytest.raises(UserError, match=r"--git 'http://h\.invalid/a/b': its web address is not https://"):
        update.permalink_base("http://h.invalid/a/b", None, "old")
