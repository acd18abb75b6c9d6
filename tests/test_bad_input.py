"""Every bad input of tests/bad_inputs.py: exit != 0, one error line, no traceback, nothing changed.

Each row runs the real CLI in-process on a scratch copy of the project (real lock, notes, docs and
vendored files). docs/refuses.md is generated from the same rows and checked here as a golden file.
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import os
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

from annotate.cli import main
from bad_inputs import HELD, PORT, ROWS, Row
from goldens import compare_golden
from site_fixtures import copy_project, copy_project_with_trace

pytest_plugins = ["site_fixtures"]

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "refuses.md"
GROUPS = {"output": "会被替换的输出 · Outputs that would be replaced",
          "lock": "锁文件 · The vendor lock",
          "wheel": "wheel 归档 · Wheel archives",
          "vendor": "严格构建发布的源码 · What a strict build publishes",
          "notes": "注释与文档 · Notes and pages",
          "trace": "构建读取的 trace · Traces a build reads",
          "checkpoint": "检查点与 trace 参数 · Checkpoints and trace options",
          "experiment": "实验文件 · Experiment files"}


def snapshot(*folders: Path) -> dict[str, str]:
    """Every file, link and folder under ``folders`` (not .cache): path -> sha256 / link target / 'dir'."""
    found: dict[str, str] = {}
    for base in folders:
        if not base.exists():
            continue
        for folder, dirs, names in os.walk(base, followlinks=False):
            here = Path(folder)
            dirs[:] = [d for d in dirs if d not in (".cache", "__pycache__")]
            for d in dirs:
                path = here / d
                found[str(path)] = f"-> {os.readlink(path)}" if path.is_symlink() else "dir"
            for name in names:
                path = here / name
                found[str(path)] = (f"-> {os.readlink(path)}" if path.is_symlink()
                                    else hashlib.sha256(path.read_bytes()).hexdigest())
    return found


def run(row: Row, project: Path, scratch: Path) -> tuple[int, str, str]:
    argv = [a.format(p=project, t=scratch) for a in row.argv]
    if argv[0] != "--root":
        argv = ["--root", str(project), *argv]
    if row.fresh:   # as on the command line: a process of its own
        done = subprocess.run([sys.executable, "-m", "annotate", *argv], capture_output=True, text=True,
                              timeout=600, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
        return done.returncode, done.stdout, done.stderr
    out, err = io.StringIO(), io.StringIO()
    env = {k: v if v is None else v.format(port=PORT[0] if PORT else "") for k, v in row.env}
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), environment(env):
        rc = main(argv)
    return rc, out.getvalue(), err.getvalue()


@contextlib.contextmanager
def environment(changes: dict[str, str | None]) -> Iterator[None]:
    """``os.environ`` with ``changes`` (None: unset) for the length of one row's run."""
    saved = {k: os.environ.get(k) for k in changes}
    for key, value in changes.items():
        os.environ.pop(key, None) if value is None else os.environ.__setitem__(key, value)
    try:
        yield
    finally:
        for key, value in saved.items():
            os.environ.pop(key, None) if value is None else os.environ.__setitem__(key, value)


@pytest.mark.parametrize("row", ROWS, ids=[r.en for r in ROWS])
def test_bad_input_gets_one_line_and_changes_nothing(row: Row, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    if row.needs == "trace":  # the session's real tiny trace (tests/conftest.py), with its full tensors
        project = copy_project_with_trace(tmp_path / "project", request.getfixturevalue("tiny_trace").out,
                                          name="cpu")
    else:
        project = copy_project(tmp_path / "project")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    if row.setup is not None:
        row.setup(project, scratch)
    before = snapshot(project, scratch)
    try:
        rc, out, err = run(row, project, scratch)
    finally:
        while HELD:
            HELD.pop().close()
        PORT.clear()
    errors = [line for line in err.splitlines() if line.startswith("annotate: error:")]
    assert rc != 0, err
    assert "Traceback" not in out + err
    assert len(errors) == 1, err
    assert row.says in errors[0], errors[0]
    assert snapshot(project, scratch) == before


def render_page() -> str:
    """docs/refuses.md from the rows: one table per group, Chinese first."""
    lines = ["# annotate 拒绝什么 · What annotate refuses", "",
             "<!-- generated from tests/bad_inputs.py by tests/test_bad_input.py; "
             "regenerate with UPDATE_GOLDEN=1 -->", "",
             "每一行是一个坏输入：annotate 以非零状态退出，只打印一行错误（指明文件/条目与修复方法），"
             "不打印回溯，也不改动任何文件。测试逐行验证这一点。",
             "Each row is a bad input: annotate exits non-zero with one error line (the file or entry, what was "
             "expected, the fix), no traceback, and leaves every file as it was. The tests check each row.", ""]
    for group, title in GROUPS.items():
        rows = [r for r in ROWS if r.group == group]
        if not rows:
            continue
        lines += [f"## {title}", "", "| 输入 · Input | 命令 · Command | 错误行包含 · The error line says |",
                  "| --- | --- | --- |"]
        for r in rows:
            command = " ".join(a.replace("{p}", "<project>").replace("{t}", "<tmp>") for a in r.argv)
            env = " ".join([f"-u {k}" for k, v in r.env if v is None]
                           + [f"{k}={v.replace('{port}', '<port>')}" for k, v in r.env if v is not None])
            says = r.says.replace("|", "\\|").replace("`", "'")
            what = f"{r.zh} · {r.en}".replace("[[", "`[[`")
            shown = f"env {env} annotate {command}" if env else f"annotate {command}"
            lines.append(f"| {what} | `{shown}` | `{says}` |")
        lines.append("")
    lines.append(f"共 {len(ROWS)} 行 · {len(ROWS)} rows.")
    return "\n".join(lines) + "\n"


def test_refuses_page_lists_every_row() -> None:
    text = render_page()
    compare_golden(PAGE, text, redacted=False)
