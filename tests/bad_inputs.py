"""The bad-input table: every input annotate refuses, what it says, in one place.

tests/test_bad_input.py runs each row (in-process, on a scratch copy of the project) and asserts:
exit code != 0, exactly one ``annotate: error:`` line containing ``says``, no traceback, and the
project tree unchanged. docs/refuses.md is generated from the same rows (its golden test keeps it
current: ``UPDATE_GOLDEN=1 pytest tests/test_bad_input.py`` rewrites it).
"""
from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

LOCK = "vendor/nano-vllm.lock.json"
VENDORED = "vendor/nano-vllm"
LAYERNORM_NOTES = "notes/nanovllm/layers/layernorm.py.yml"
MAP = "map/decoder-block.yml"


_EXPERIMENT = """\
title: {{zh: 实验, en: experiment}}
hypothesis: {{zh: 假设, en: hypothesis}}
edits:
  - {{file: nanovllm/layers/layernorm.py, symbol: {symbol}, statement: x = x.float(), replace: {replace}}}
"""


@dataclass(frozen=True)
class Row:
    """One bad input: how to make it, the command that meets it, and what annotate must say."""

    group: str  # section of the docs page
    zh: str  # the input, in Chinese
    en: str  # the input, in English
    argv: tuple[str, ...]  # after `annotate --root <project>`; "{p}" is the project root, "{t}" a scratch folder
    says: str  # a substring of the one error line
    setup: Callable[[Path, Path], None] | None = None  # (project, scratch) -> None: make the bad input
    needs: str = ""  # "trace": the project needs a real trace under traces/cpu first
    fresh: bool = False  # run as its own process (an experiment imports its edited vendored package anew)
    env: tuple[tuple[str, str | None], ...] = ()  # environment variables for the run (None: unset)


# ---------------------------------------------------------------- helpers that make bad inputs

def edit_json(rel: str, change: Callable[[dict], None]) -> Callable[[Path, Path], None]:
    def run(project: Path, scratch: Path) -> None:
        path = project / rel
        data = json.loads(path.read_text(encoding="utf-8"))
        change(data)
        path.write_text(json.dumps(data), encoding="utf-8")
    return run


def write(rel: str, data: bytes) -> Callable[[Path, Path], None]:
    def run(project: Path, scratch: Path) -> None:
        (project / rel).parent.mkdir(parents=True, exist_ok=True)
        (project / rel).write_bytes(data)
    return run


def append(rel: str, data: bytes) -> Callable[[Path, Path], None]:
    def run(project: Path, scratch: Path) -> None:
        with (project / rel).open("ab") as handle:
            handle.write(data)
    return run


def replace(rel: str, old: str, new: str) -> Callable[[Path, Path], None]:
    def run(project: Path, scratch: Path) -> None:
        text = (project / rel).read_text(encoding="utf-8")
        assert old in text, f"{rel} no longer holds {old!r}"
        (project / rel).write_text(text.replace(old, new, 1), encoding="utf-8")
    return run


def symlink(rel: str, target: str) -> Callable[[Path, Path], None]:
    def run(project: Path, scratch: Path) -> None:
        os.symlink(target, project / rel)
    return run


def linked_copy(rel: str) -> Callable[[Path, Path], None]:
    """The vendored file ``rel`` replaced by a link to an identical copy in the scratch folder."""
    def run(project: Path, scratch: Path) -> None:
        copy = scratch / Path(rel).name
        copy.write_bytes((project / rel).read_bytes())
        (project / rel).unlink()
        os.symlink(copy, project / rel)
    return run


def linked_experiment(project: Path, scratch: Path) -> None:
    """experiments/x.yml a link to a file outside the experiments (its bytes must never be echoed)."""
    (scratch / "notes.txt").write_text("PRIVATE: [not an experiment\n", encoding="utf-8")
    (project / "experiments").mkdir(exist_ok=True)
    os.symlink(scratch / "notes.txt", project / "experiments" / "x.yml")


def tracked_folder(project: Path, scratch: Path) -> None:
    (project / "mine").mkdir()
    (project / "mine" / "thesis.md").write_text("my own work\n", encoding="utf-8")
    for args in (["init", "-q"], ["add", "mine/thesis.md"],
                 ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "mine"]):
        subprocess.run(["git", "-C", str(project), *args], check=True, capture_output=True)


def foreign_folder(project: Path, scratch: Path) -> None:
    (scratch / "photos").mkdir()
    (scratch / "photos" / "cat.jpg").write_bytes(b"\xff\xd8 not really a cat")


#: lock files and listeners a row holds for the length of its run (closed by the test afterwards)
HELD: list = []
#: the port of the row's silent listener, for "{port}" in its environment (:func:`silent_port`)
PORT: list[int] = []


class _Silent:
    """A port on 127.0.0.1 that accepts connections and never says a word (loopback only): a rendezvous
    host that is there and does not answer."""

    def __init__(self) -> None:
        import socket
        import threading

        self.server = socket.socket()
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(8)
        self.accepted: list = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        try:
            while True:
                self.accepted.append(self.server.accept()[0])
        except OSError:
            return

    def close(self) -> None:
        for conn in self.accepted:
            conn.close()
        self.server.close()


def silent_port(project: Path, scratch: Path) -> None:
    """Listen on a free loopback port that never answers, for the row's MASTER_PORT."""
    held = _Silent()
    HELD.append(held)
    PORT[:] = [held.server.getsockname()[1]]


def another_run(flag_target: str) -> Callable[[Path, Path], None]:
    """Hold the output lock of ``flag_target`` as a concurrent run would."""
    def run(project: Path, scratch: Path) -> None:
        import fcntl

        from annotate.guard import lock_path

        path = lock_path(project, Path(flag_target.format(p=project, t=scratch)))
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(path, "a+b")
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        HELD.append(handle)
    return run


def mid_swap(rel: str) -> Callable[[Path, Path], None]:
    """Another run between its swap's two renames of output ``rel``: the old copy aside, the lock held."""
    def run(project: Path, scratch: Path) -> None:
        target = project / rel
        aside = target.parent / f".{target.name}.old-abc"
        aside.mkdir(parents=True)
        (aside / "trace.json").write_text("{}", encoding="utf-8")
        another_run(f"{{p}}/{rel}")(project, scratch)
    return run


def upstream_files(change: Callable[[dict], None]) -> Callable[[Path, Path], None]:
    return edit_json(LOCK, lambda d: change(d["upstream"]["files"]))


def _first(d: dict) -> dict:
    return d[sorted(d)[0]]


def checkpoint(change: Callable[[dict], object]) -> Callable[[Path, Path], None]:
    """A local checkpoint folder {t}/ckpt whose config.json is ``change(valid config)``.

    The valid config is the tiny preset's, cut to 2 layers, as `annotate trace` itself writes it.
    """
    def run(project: Path, scratch: Path) -> None:
        from annotate.trace.model.options import PRESETS
        from annotate.trace.model.runtime import preset_config  # imports torch: only when the row runs

        folder = scratch / "ckpt"
        folder.mkdir()
        config = preset_config(PRESETS["tiny"], 2, "bfloat16")
        result = change(config)
        body = result if isinstance(result, bytes) else json.dumps(config if result is None else result).encode()
        (folder / "config.json").write_bytes(body)
        (folder / "model.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{}      ")
    return run


def weights(change: Callable[[dict], object] | None = None, raw: bytes | None = None) -> Callable[[Path, Path], None]:
    """A checkpoint {t}/ckpt with a valid config.json and real random weights, then ``change(state)`` (or ``raw`` bytes)."""
    def run(project: Path, scratch: Path) -> None:
        import torch
        from safetensors.torch import save_file

        from annotate.trace.model.runtime import random_state_dict

        checkpoint(lambda c: None)(project, scratch)
        config = json.loads((scratch / "ckpt" / "config.json").read_text(encoding="utf-8"))
        state = random_state_dict(config, 0, torch.float32)
        if change is not None:
            change(state)
        path = scratch / "ckpt" / "model.safetensors"
        save_file(state, str(path))
        if raw is not None:
            path.write_bytes(path.read_bytes()[: len(raw)] if raw == b"truncate" else raw)
    return run


def _nan(state: dict) -> None:
    state["model.norm.weight"][0] = float("nan")


def _drop_q_and_norm(state: dict) -> None:
    del state["model.layers.0.self_attn.q_proj.weight"], state["model.norm.weight"]


def _reshape(state: dict) -> None:
    import torch

    state["model.layers.1.mlp.up_proj.weight"] = torch.zeros(3, 5)


WHEEL = ".cache/wheels/nano_vllm_fork-20260210-py3-none-any.whl"


def _zip(members: dict[str, bytes]) -> bytes:
    import io
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buf.getvalue()


def _corrupt_deflate() -> bytes:
    data = bytearray(_zip({"nanovllm/a.py": b"x = 1\n" * 2000}))
    start = data.index(b"nanovllm/a.py") + len("nanovllm/a.py")  # the local header's name, then the deflate stream
    for i in range(start + 8, start + 40):
        data[i] ^= 0x5A
    return bytes(data)


def _lying_size() -> bytes:
    """A small wheel whose central directory records a 3.7 GiB member (a zip bomb's shape)."""
    data = bytearray(_zip({"nanovllm/a.py": b"x = 1\n"}))
    central = data.index(b"PK\x01\x02")
    data[central + 24:central + 28] = (0xF0000000).to_bytes(4, "little")
    return bytes(data)


def _conflicting_wheel(project: Path, scratch: Path) -> None:
    """A pinned wheel with every vendored file, plus a member whose path runs through one of them
    (`nanovllm/config.py/extra.py`): staging it would meet a file where it needs a folder."""
    vendored = project / VENDORED
    members = {p.relative_to(vendored).as_posix(): p.read_bytes() for p in sorted(vendored.rglob("*")) if p.is_file()}
    pinned_wheel(_zip({**members, "nanovllm/config.py/extra.py": b"y = 2\n"}))(project, scratch)


def pinned_wheel(data: bytes | None) -> Callable[[Path, Path], None]:
    """The lock pins a wheel with exactly these bytes (so the hash check passes) and no vendored copy is there;
    ``None``: a folder stands where the cached wheel should be."""
    def run(project: Path, scratch: Path) -> None:
        import hashlib
        import shutil

        shutil.rmtree(project / VENDORED)
        wheel = project / WHEEL
        wheel.parent.mkdir(parents=True, exist_ok=True)
        if data is None:
            wheel.mkdir()
            digest = "0" * 64
        else:
            wheel.write_bytes(data)
            digest = hashlib.sha256(data).hexdigest()
        edit_json(LOCK, lambda d: d["source"].update(sha256=digest, files={}))(project, scratch)
    return run


TRACE = "traces/cpu/trace.json"


def trace_json(change: Callable[[dict], None]) -> Callable[[Path, Path], None]:
    """Edit the project's trace (a copy of the session's real tiny trace, under traces/cpu)."""
    return edit_json(TRACE, change)


def _record(d: dict, i: int = 0) -> dict:
    return d["records"][i]


def _first_var(d: dict) -> dict:
    return next(v for r in d["records"] for v in r["vars"])


def _statement(d: dict) -> dict:
    return next(st for f in d["functions"] for st in f["statements"])


def _in_layer(d: dict) -> dict:
    return next(r for r in d["records"] if r["layer"] is not None)


def _matched_by(d: dict) -> dict:
    return next(m for mv in d["math"] for m in mv.get("matched_by", []))


def _saved_var(d: dict) -> dict:
    return next(v for r in d["records"] for v in r["vars"] if v.get("tensor"))


# ---------------------------------------------------------------- the rows

ROWS: tuple[Row, ...] = (
    # --- outputs that must never be replaced
    Row("output", "把站点输出到项目根目录", "site output into the project root",
        ("build", "--site-dir", "{p}"), "is the project root or a folder holding it"),
    Row("output", "输出到项目根目录的上级", "site output into a folder above the project",
        ("build", "--site-dir", "{p}/.."), "is the project root or a folder holding it"),
    Row("output", "输出到 notes/", "site output into notes/", ("build", "--site-dir", "{p}/notes"),
        "is or holds the project's input notes/"),
    Row("output", "输出到 docs/", "site output into docs/", ("build", "--site-dir", "{p}/docs"),
        "is or holds the project's input docs/"),
    Row("output", "输出到 vendor/", "site output into vendor/", ("build", "--site-dir", "{p}/vendor"),
        "is or holds the project's input vendor/"),
    Row("output", "输出到 traces/", "site output into traces/", ("build", "--site-dir", "{p}/traces/x"),
        "is or holds the project's input traces/"),
    Row("output", "输出到含 git 跟踪文件的文件夹", "site output into a folder with git-tracked files",
        ("build", "--site-dir", "{p}/mine"), "holds git-tracked files", tracked_folder),
    Row("output", "输出到不是 annotate 输出的非空文件夹", "site output into a non-empty folder annotate did not write",
        ("build", "--site-dir", "{t}/photos"), "not empty and not a previous annotate output", foreign_folder),
    Row("output", "输出路径是一个文件", "site output path is a file", ("build", "--site-dir", "{p}/mkdocs.yml"),
        "is a file, not a folder"),
    Row("output", "trace 输出到项目根目录", "trace output into the project root",
        ("trace", "--preset", "tiny", "--out", "{p}", "--force"), "is the project root"),
    Row("output", "trace 输出到 notes/", "trace output into notes/",
        ("trace", "--preset", "tiny", "--out", "{p}/notes", "--force"), "is or holds the project's input notes/"),
    Row("output", "trace 输出到 traces/ 本身", "trace output into traces/ itself",
        ("trace", "--preset", "tiny", "--out", "{p}/traces", "--force"), "is or holds the project's input traces/"),
    Row("output", "trace --force 覆盖不是 trace 的文件夹", "trace --force over a folder that is not a trace",
        ("trace", "--preset", "tiny", "--out", "{t}/photos", "--force"), "not empty and not a previous annotate output",
        foreign_folder),
    Row("output", "被拒绝的 trace 不创建 --out 的上级目录", "a refused trace creates no --out parents",
        ("trace", "--model", "{t}/empty", "--out", "{p}/new/deep/out"), "no config.json",
        lambda p, t: (t / "empty").mkdir()),
    Row("output", "trace 输出到 /proc 下（root 也不能创建）", "trace output under /proc (not even root can create it)",
        ("trace", "--preset", "tiny", "--out", "/proc/annotate-out", "--force"), "cannot write in /proc"),
    Row("output", "站点输出到 /proc 下", "site output under /proc", ("build", "--site-dir", "/proc/annotate-site"),
        "cannot write in /proc"),
    Row("output", "两个 build 同时写同一个输出", "two builds writing one output at once",
        ("build", "--site-dir", "{t}/site"), "another annotate run is writing it", another_run("{t}/site")),
    # --- the lock
    Row("lock", "锁文件不是 UTF-8", "lock file not UTF-8", ("vendor", "status"), "is not UTF-8",
        append(LOCK, b"\n\xff\xfe")),
    Row("lock", "锁文件不是 JSON", "lock file not JSON", ("vendor", "status"), "invalid JSON",
        write(LOCK, b'{"format": 1,')),
    Row("lock", "upstream.files 是列表", "upstream.files is a list", ("vendor", "status"),
        "$.upstream.files: expected an object, got a list", edit_json(LOCK, lambda d: d["upstream"].update(files=[]))),
    Row("lock", "bytes 不是整数", "a file's bytes is not an integer", ("vendor", "status"),
        'expected an integer, got "lots"', upstream_files(lambda f: _first(f).update(bytes="lots"))),
    Row("lock", "行哈希不是 16 位十六进制", "a line hash is not 16 hex digits", ("vendor", "status"),
        "expected 16 lowercase hex digits, got \"abc\"",
        upstream_files(lambda f: _first(f)["line_sha256_16"].__setitem__(0, "abc"))),
    Row("lock", "line_sha256_16 是字符串", 'line_sha256_16 is "abc"', ("vendor", "status"),
        'line_sha256_16: expected a list, got "abc"', upstream_files(lambda f: _first(f).update(line_sha256_16="abc"))),
    Row("lock", "repo 为 null", "repo is null", ("vendor", "status"),
        "$.upstream.repo: expected an https:// URL of the repository, got null",
        edit_json(LOCK, lambda d: d["upstream"].update(repo=None))),
    Row("lock", "repo 是 javascript: 链接", "repo is a javascript: URL", ("build", "--site-dir", "{t}/site"),
        "$.upstream.repo: expected an https:// URL", edit_json(LOCK, lambda d: d["upstream"].update(repo="javascript:alert(1)//x"))),
    Row("lock", "commit 是数字", "commit is a number", ("vendor", "status"),
        "$.upstream.commit: expected a full 40-hex commit, got 12", edit_json(LOCK, lambda d: d["upstream"].update(commit=12))),
    Row("lock", "锁的键指向 vendor 之外", "a lock key points outside the vendor folder", ("vendor", "status"),
        "expected a relative POSIX path inside the vendor folder",
        upstream_files(lambda f: f.update({"../../etc/hostname": _first(f)}))),
    Row("lock", "git 源看起来像命令行选项", "a git source that looks like an option", ("vendor", "sync"),
        "$.source.url: expected a git URL or a local path",
        edit_json(LOCK, lambda d: d.update(source={"kind": "git", "url": "--upload-pack=touch x", "commit": "0" * 40}))),
    Row("lock", "锁里多出一个源没有的文件", "the lock lists an upstream file the source does not", ("vendor", "sync"),
        "$.source.files: expected an entry for every upstream file",
        upstream_files(lambda f: f.update({"nanovllm/extra.py": _first(f)}))),
    Row("lock", "vendor/ 里多出一份锁的拷贝（check）", "a stray copy of a lock in vendor/ (check)",
        ("check", "--no-claims", "--no-math"), "(or, if vendor/vllm-old.lock.json is stray, delete it)",
        lambda p, t: (p / "vendor/vllm-old.lock.json").write_bytes((p / "vendor/vllm.lock.json").read_bytes())),
    Row("lock", "vendor/ 里多出一份锁的拷贝（sync）", "a stray copy of a lock in vendor/ (sync)", ("vendor", "sync"),
        "vendor/vllm-old.lock.json: vllm/distributed/communication_op.py is also vendored by vendor/vllm.lock.json",
        lambda p, t: (p / "vendor/vllm-old.lock.json").write_bytes((p / "vendor/vllm.lock.json").read_bytes())),
    # --- wheels (the registry source)
    Row("wheel", "wheel 不是 zip", "a wheel that is not a zip", ("vendor", "sync"), "not a readable wheel",
        pinned_wheel(b"this is not a zip archive")),
    Row("wheel", "wheel 的 deflate 数据损坏", "a wheel with corrupt deflate data", ("vendor", "sync"),
        "not a readable wheel", pinned_wheel(_corrupt_deflate())),
    Row("wheel", "wheel 成员比上限大（zip 炸弹）", "a wheel member larger than the cap (a zip bomb)", ("vendor", "sync"),
        "bytes uncompressed (cap", pinned_wheel(_lying_size())),
    Row("wheel", "wheel 成员名过长", "a wheel member name too long", ("vendor", "sync"), "name too long",
        pinned_wheel(_zip({"nanovllm/" + "a" * 300 + ".py": b"x = 1\n"}))),
    Row("wheel", "wheel 是一个文件夹", "a wheel that is a folder", ("vendor", "sync"), "not a file",
        pinned_wheel(None)),
    Row("wheel", "wheel 成员路径与文件冲突", "a wheel member whose path runs through a file", ("vendor", "sync"),
        "is a file, and member 'nanovllm/config.py/extra.py' needs it to be a folder",
        _conflicting_wheel),
    # --- the vendored copy a strict build publishes
    Row("vendor", "vendor 里有指向 /etc/passwd 的符号链接", "a vendored symlink to /etc/passwd",
        ("build", "--site-dir", "{t}/site"), "is a symbolic link, not a vendored file",
        symlink(f"{VENDORED}/nanovllm/zz.py", "/etc/passwd")),
    Row("vendor", "vendor 里多出一个文件", "an extra file in the vendored copy", ("build", "--site-dir", "{t}/site"),
        "not in vendor/nano-vllm.lock.json", write(f"{VENDORED}/nanovllm/extra.py", b"x = 1\n")),
    Row("vendor", "vendor 里的文件被改过", "an edited vendored file", ("build", "--site-dir", "{t}/site"),
        "sha256 differs from vendor/nano-vllm.lock.json", append(f"{VENDORED}/nanovllm/config.py", b"# edited\n")),
    Row("vendor", "vendor 里的文件不是 UTF-8（非严格构建）", "a vendored file not UTF-8 (non-strict build)",
        ("build", "--no-strict", "--site-dir", "{t}/site"), "is not UTF-8", append(f"{VENDORED}/nanovllm/config.py", b"\xff\n")),
    Row("vendor", "带注释的 vendor 文件被换成符号链接（非严格构建）", "an annotated vendored file replaced by a link (non-strict build)",
        ("build", "--no-strict", "--site-dir", "{t}/site"), "is a symbolic link, not a vendored file (annotated by",
        linked_copy(f"{VENDORED}/nanovllm/layers/layernorm.py")),
    Row("vendor", "check 也检查 vendor", "check verifies the vendor too", ("check", "--strict", "--no-claims"),
        "is a symbolic link, not a vendored file", symlink(f"{VENDORED}/nanovllm/zz.py", "/etc/passwd")),
    # --- notes and docs
    Row("notes", "注释文件不是 UTF-8", "a notes file not UTF-8", ("check", "--no-claims", "--no-math"), "is not UTF-8",
        append(LAYERNORM_NOTES, b"\n# \xc3\x28\n")),
    Row("notes", "注释文件 YAML 语法错误", "a notes file with broken YAML", ("check", "--no-claims", "--no-math"),
        "malformed YAML", append(LAYERNORM_NOTES, b"\n  - symbol: [unclosed\n")),
    Row("notes", "注释正文里的行内公式写错", "bad inline LaTeX in a note's prose", ("check", "--strict", "--no-claims"),
        "`zh`", replace(LAYERNORM_NOTES, "$\\varepsilon$ 加在", "$\\frac{1}{2$ 加在")),
    Row("notes", "注释正文里的行内公式写错（严格构建）", "bad inline LaTeX in a note's prose (strict build)",
        ("build", "--site-dir", "{t}/site"), "note 2 `zh`: KaTeX parse error",
        replace(LAYERNORM_NOTES, "$\\varepsilon$ 加在", "$\\frac{1}{2$ 加在")),
    Row("notes", "mkdocs.yml 的 docs_dir 指向不存在的文件夹", "mkdocs.yml's docs_dir names no folder",
        ("check", "--no-claims", "--no-math"), "docs_dir 'nowhere' is not a folder",
        replace("mkdocs.yml", "docs_dir: docs\n", "docs_dir: nowhere\n")),
    Row("notes", "mkdocs.yml YAML 语法错误（构建）", "mkdocs.yml with broken YAML (build)", ("build", "--site-dir", "{t}/site"),
        "mkdocs.yml: cannot be read", append("mkdocs.yml", b"\nnav: [unclosed\n")),
    Row("notes", "文档里的公式写错（check）", "bad LaTeX on a page (check)", ("check", "--no-claims"),
        "docs/writing.md: math $\\frac{1}{2$", append("docs/writing.md", b"\n\nBroken: $\\frac{1}{2$ here.\n")),
    Row("notes", "文档里的公式写错（严格构建）", "bad LaTeX on a page (strict build)", ("build", "--site-dir", "{t}/site"),
        "math $\\frac{1}{2$", append("docs/writing.md", b"\n\nBroken: $\\frac{1}{2$ here.\n")),
    Row("notes", "文档里未闭合的 [[", "an unclosed [[ in a page", ("check", "--no-claims", "--no-math"),
        "unclosed reference", append("docs/index.md", "\n见 [[layernorm.py › RMSNorm\n".encode())),
    Row("notes", "文档不是 UTF-8", "a page not UTF-8", ("check", "--no-claims", "--no-math"), "is not UTF-8",
        append("docs/writing.md", b"\n\xff\n")),
    Row("notes", "注释文件含控制字符", "a notes file with a control character", ("check", "--no-claims", "--no-math"),
        "is not allowed in YAML", append(LAYERNORM_NOTES, b"\n# \x07\n")),
    Row("notes", "文档不是 UTF-8（构建）", "a page not UTF-8 (build)", ("build", "--site-dir", "{t}/site"),
        "docs/writing.md: byte", append("docs/writing.md", b"\n\xff\n")),
    Row("notes", "--root 指向不存在的目录", "--root that does not exist", ("--root", "{t}/nowhere", "check", "--strict"),
        "no such folder"),
    Row("notes", "地图里拼错的键", "a mistyped key in the map", ("check", "--no-claims", "--no-math"),
        "$.rows[0].stpe: unknown key", replace(MAP, "    zh: 词嵌入\n", "    zh: 词嵌入\n    stpe: typo\n")),
    Row("notes", "地图里重复的步骤（重复的 HTML id）", "a repeated step in the map (a duplicate HTML id)",
        ("check", "--no-claims", "--no-math"), "step 'embedding' repeats",
        replace(MAP, "  - step: first-input-norm\n", "  - step: embedding\n")),
    Row("notes", "地图文件被删除", "the map file deleted", ("check", "--no-claims", "--no-math"),
        "map/decoder-block.yml: missing", lambda p, t: (p / MAP).unlink()),
    Row("notes", "地图文件是指向别处的符号链接", "the map file a symlink elsewhere", ("check", "--no-claims", "--no-math"),
        "map/decoder-block.yml: is a symbolic link", lambda p, t: ((p / MAP).unlink(), symlink(MAP, "/etc/passwd")(p, t))),
    Row("notes", "`{{value}}` 的层是 ²", "a `{{value}}` layer written ²", ("build", "--site-dir", "{t}/site"),
        "layer '²' is not a number", replace("docs/lesson.md", "› residual › 2}}", "› residual › ²}}")),
    Row("notes", "未闭合的 `{{value`", "an unclosed `{{value`", ("build", "--site-dir", "{t}/site"),
        "unclosed {{value", append("docs/lesson.md", "\n见 {{value qwen3.py › Qwen3DecoderLayer.forward\n".encode())),
    Row("notes", "公式的 `{{code}}` 指向不存在的语句", "a formula's `{{code}}` names a statement that is not there",
        ("build", "--site-dir", "{t}/site"), "fix the symbol or statement text",
        replace("docs/lesson.md", "› return F.silu(x) * y}}", "› return F.relu(x) * y}}")),
    Row("notes", "`{{code}}` 不紧跟在公式后", "a `{{code}}` line that follows no formula", ("build", "--site-dir", "{t}/site"),
        "must stand on its own line right after a display",
        append("docs/lesson.md", "\n正文 prose\n\n{{code qwen3.py › Qwen3MLP.forward}}\n".encode())),
    # --- traces a build reads
    Row("trace", "记录的 line 是字符串", 'a record\'s line is "151"', ("build", "--site-dir", "{t}/site"),
        '$.records[0].line: expected an integer, got "151"', trace_json(lambda d: _record(d).update(line="151")), "trace"),
    Row("trace", "meta.model.layers 是 \"four\"", 'meta.model.layers is "four"', ("build", "--site-dir", "{t}/site"),
        "$.meta.model.layers: expected an integer", trace_json(lambda d: d["meta"]["model"].update(layers="four")), "trace"),
    Row("trace", "kernels 是字符串", 'kernels is "none"', ("build", "--site-dir", "{t}/site"),
        '$.kernels: expected a list, got "none"', trace_json(lambda d: d.update(kernels="none")), "trace"),
    Row("trace", "math 是对象", "math is an object", ("build", "--site-dir", "{t}/site"),
        "$.math: expected a list, got an object", trace_json(lambda d: d.update(math={"x": 1})), "trace"),
    Row("trace", "变量的 head 为 null", "a variable's head is null", ("build", "--site-dir", "{t}/site"),
        ".head: expected a list, got null", trace_json(lambda d: _first_var(d).update(head=None)), "trace"),
    Row("trace", "flags 是字符串", 'flags is "x"', ("build", "--site-dir", "{t}/site"),
        '$.flags: expected a list, got "x"', trace_json(lambda d: d.update(flags="x")), "trace"),
    Row("trace", "vendor.files 是列表", "vendor.files is a list", ("build", "--site-dir", "{t}/site"),
        "$.vendor.files: expected an object, got a list", trace_json(lambda d: d["vendor"].update(files=[])), "trace"),
    Row("trace", "vendor.root 指向别处", "vendor.root points elsewhere", ("build", "--site-dir", "{t}/site"),
        '$.vendor.root: expected "vendor/nano-vllm"', trace_json(lambda d: d["vendor"].update(root="../../etc")), "trace"),
    Row("trace", "kernels 的条目缺字段", "a kernels entry without its fields", ("build", "--site-dir", "{t}/site"),
        "$.kernels[0].function: missing", trace_json(lambda d: d.update(kernels=[{"x": 1}])), "trace"),
    Row("trace", "identity.matches 是字符串", "identity.matches is a string", ("build", "--site-dir", "{t}/site"),
        'identity.matches: expected a list, got "x"',
        trace_json(lambda d: _first_var(d).update(identity={"status": "match", "matches": "x"})), "trace"),
    Row("trace", "记录的 file 指向 vendor 之外", "a record's file points outside the vendor", ("build", "--site-dir", "{t}/site"),
        "$.records[0].file: expected a relative POSIX path", trace_json(lambda d: _record(d).update(file="../../etc/passwd")),
        "trace"),
    Row("trace", "缺 meta.device_name", "meta.device_name missing", ("build", "--site-dir", "{t}/site"),
        "$.meta.device_name: missing", trace_json(lambda d: d["meta"].pop("device_name")), "trace"),
    Row("trace", "变量条目是字符串", "a record's vars entry is a string", ("build", "--site-dir", "{t}/site"),
        '$.records[0].vars[0]: expected an object, got "x"', trace_json(lambda d: _record(d).update(vars=["x"])), "trace"),
    Row("trace", "记录缺 layer", "a record without layer", ("build", "--site-dir", "{t}/site"),
        "$.records[0].layer: missing", trace_json(lambda d: _record(d).pop("layer")), "trace"),
    Row("trace", "flag 缺 message", "a flag without message", ("build", "--site-dir", "{t}/site"),
        "$.flags[0].message: missing", trace_json(lambda d: d.update(flags=[{"kind": "aliasing", "records": [0]}])), "trace"),
    Row("trace", "语句缺 end_line", "a statement without end_line", ("build", "--site-dir", "{t}/site"),
        ".statements[0].end_line: missing", trace_json(lambda d: _statement(d).pop("end_line")), "trace"),
    Row("trace", "math 条目缺 summary", "a math entry without summary", ("build", "--site-dir", "{t}/site"),
        "$.math[0].summary: missing", trace_json(lambda d: d["math"][0].pop("summary")), "trace"),
    Row("trace", "记录的层号超出模型层数", "a record's layer beyond the model's layers", ("build", "--site-dir", "{t}/site"),
        ".layer: expected a layer below meta.model.layers",
        trace_json(lambda d: _in_layer(d).update(layer=d["meta"]["model"]["layers"])), "trace"),
    Row("trace", "end_line 在 line 之前", "a record's end_line before its line", ("build", "--site-dir", "{t}/site"),
        "$.records[0].end_line: expected a line ≥ line", trace_json(lambda d: _record(d).update(end_line=_record(d)["line"] - 1)), "trace"),
    Row("trace", "记录的 id 与位置不符", "a record's id not its index", ("build", "--site-dir", "{t}/site"),
        "$.records[1].id: expected 1 (a record's id is its index)", trace_json(lambda d: _record(d, 1).update(id=0)), "trace"),
    Row("trace", "identity.status 未知", "an unknown identity.status", ("build", "--site-dir", "{t}/site"),
        ".identity.status: expected one of", trace_json(lambda d: _first_var(d).update(identity={"status": "maybe"})), "trace"),
    Row("trace", "flow 行指向不存在的记录", "a flow row pointing past the records", ("build", "--site-dir", "{t}/site"),
        "$.summary.flow[0].record: expected a record id below",
        trace_json(lambda d: d["summary"]["flow"][0].update(record=len(d["records"]))), "trace"),
    Row("trace", "matched_by 指向没有的变量", "a math matched_by naming a variable its record lacks",
        ("build", "--site-dir", "{t}/site"), ".matched_by[0].var: expected a variable of record",
        trace_json(lambda d: _matched_by(d).update(var="nope")), "trace"),
    Row("trace", "same_copy_as 指向后面的记录", "same_copy_as pointing at a later record", ("build", "--site-dir", "{t}/site"),
        ".same_copy_as.record: expected an earlier record",
        trace_json(lambda d: _first_var(d).update(same_copy_as={"record": 5, "var": "x"})), "trace"),
    Row("trace", "hf_lines 的行号是字符串", "an hf_lines line that is a string", ("build", "--site-dir", "{t}/site"),
        '$.summary.hf_lines.lines[0].line: expected an integer, got "270"',
        trace_json(lambda d: d["summary"]["hf_lines"]["lines"][0].update(line="270")), "trace"),
    Row("trace", "记录值含 NaN", "a recorded value is NaN", ("build", "--site-dir", "{t}/site"),
        "holds NaN or infinite values", trace_json(lambda d: _first_var(d).update(norm=float("nan"))), "trace"),
    Row("trace", "trace.json 不是 UTF-8", "trace.json not UTF-8", ("build", "--site-dir", "{t}/site"),
        "is not UTF-8", append(TRACE, b"\xff"), "trace"),
    Row("trace", "tensors.safetensors 被截断", "a truncated tensors.safetensors", ("build", "--site-dir", "{t}/site"),
        "truncated or not safetensors", write("traces/cpu/tensors.safetensors", b"\x10\x00\x00\x00\x00\x00\x00\x00{\"a\""),
        "trace"),
    Row("trace", "张量键缺失", "a tensor key missing from tensors.safetensors", ("build", "--site-dir", "{t}/site"),
        "missing from the file", trace_json(lambda d: _saved_var(d).update(tensor="nope")), "trace"),
    Row("trace", "张量形状与 trace.json 不符", "a tensor's shape differs from trace.json", ("build", "--site-dir", "{t}/site"),
        "trace.json says", trace_json(lambda d: _saved_var(d).update(shape=[1, 2, 3])), "trace"),
    Row("trace", "bandwidth.json 不是 JSON", "bandwidth.json not JSON", ("build", "--site-dir", "{t}/site"),
        "invalid JSON", write("traces/cpu/bandwidth.json", b"{oops"), "trace"),
    # --- checkpoints (--model)
    Row("checkpoint", "config.json 缺 num_hidden_layers", "config.json without num_hidden_layers",
        ("trace", "--model", "{t}/ckpt", "--out", "{t}/out"), "$.num_hidden_layers: missing",
        checkpoint(lambda c: c.pop("num_hidden_layers") and None)),
    Row("checkpoint", "config.json 的 hidden_size 是字符串", "config.json with hidden_size \"64\"",
        ("trace", "--model", "{t}/ckpt", "--out", "{t}/out"), "$.hidden_size: expected an integer",
        checkpoint(lambda c: c.update(hidden_size="64"))),
    Row("checkpoint", "config.json 是列表", "config.json is a list", ("trace", "--model", "{t}/ckpt", "--out", "{t}/out"),
        "$: expected an object, got a list", checkpoint(lambda c: [c])),
    Row("checkpoint", "config.json 不是 UTF-8", "config.json not UTF-8", ("trace", "--model", "{t}/ckpt", "--out", "{t}/out"),
        "is not UTF-8", checkpoint(lambda c: b'{"a": "\xff"}')),
    Row("checkpoint", "权重缺 q_proj 和 norm", "weights without q_proj and norm",
        ("trace", "--model", "{t}/ckpt", "--out", "{t}/out"), "weight model.layers.0.self_attn.q_proj.weight missing",
        weights(_drop_q_and_norm)),
    Row("checkpoint", "权重形状不对", "a weight of the wrong shape", ("trace", "--model", "{t}/ckpt", "--out", "{t}/out"),
        "up_proj.weight: shape [3, 5], expected", weights(_reshape)),
    Row("checkpoint", "权重含 NaN", "a weight holding NaN", ("trace", "--model", "{t}/ckpt", "--out", "{t}/out"),
        "model.norm.weight: holds NaN or infinite values", weights(_nan)),
    Row("checkpoint", "model.safetensors 被截断", "a truncated model.safetensors",
        ("trace", "--model", "{t}/ckpt", "--out", "{t}/out"), "not a readable safetensors file",
        weights(raw=b"\x00" * 100)),
    Row("checkpoint", "--seed 超出范围", "--seed out of range", ("trace", "--preset", "tiny", "--seed", "99999999999999999999999",
                                                             "--out", "{t}/out"), "--seed"),
    # --- tensor parallel (--tp): what nano-vllm shards must divide by the ranks
    Row("checkpoint", "--tp 不整除注意力头数", "--tp not dividing the attention heads",
        ("trace", "--preset", "tiny", "--tp", "3", "--out", "{t}/out"), "does not divide the attention heads"),
    Row("checkpoint", "--tp 不整除 kv 头数", "--tp not dividing the kv-heads",
        ("trace", "--model", "{t}/ckpt", "--tp", "2", "--out", "{t}/out"), "does not divide the kv-heads",
        checkpoint(lambda c: c.update(num_key_value_heads=1))),
    Row("checkpoint", "--tp 不整除 F", "--tp not dividing F (intermediate_size)",
        ("trace", "--model", "{t}/ckpt", "--tp", "2", "--out", "{t}/out"), "does not divide F (intermediate_size)",
        checkpoint(lambda c: c.update(intermediate_size=129))),
    Row("checkpoint", "--tp 不整除词表", "--tp not dividing the vocabulary",
        ("trace", "--model", "{t}/ckpt", "--tp", "2", "--out", "{t}/out"), "does not divide the vocabulary",
        checkpoint(lambda c: c.update(vocab_size=255))),
    Row("checkpoint", "--tp 多于设备", "--tp larger than the devices there are",
        ("trace", "--model", "{t}/ckpt", "--tp", "1024", "--out", "{t}/out"), "CPU cores here (one rank each)",
        checkpoint(lambda c: c.update(num_attention_heads=1024, num_key_value_heads=1024, intermediate_size=1024,
                                      vocab_size=1024))),
    # --- annotate budget: every option and size checked before anything is built from it
    *(Row("checkpoint", f"budget --memory {m}（不是显存大小）", f"budget --memory {m} (not a device size)",
          ("budget", "--model", "{t}/ckpt", "--memory", m),
          f"--memory {float(m):g}: expected the device's memory in GiB", checkpoint(lambda c: None))
      for m in ("nan", "inf", "1e308", "-1", "0")),
    Row("checkpoint", "budget --tokens 10²⁰（超出位置上限）", "budget --tokens 10²⁰ (beyond the positions)",
        ("budget", "--model", "{t}/ckpt", "--tokens", str(10**20)), "(the model's max_position_embeddings)",
        checkpoint(lambda c: None)),
    Row("checkpoint", "config.json 声称 10¹² 层（budget）", "config.json claiming 10¹² layers (budget)",
        ("budget", "--model", "{t}/ckpt"), "$.num_hidden_layers: expected an integer <= 1024",
        checkpoint(lambda c: c.update(num_hidden_layers=10**12))),
    Row("checkpoint", "config.json 声称 10¹² 层（trace）", "config.json claiming 10¹² layers (trace)",
        ("trace", "--model", "{t}/ckpt", "--out", "{t}/out"), "$.num_hidden_layers: expected an integer <= 1024",
        checkpoint(lambda c: c.update(num_hidden_layers=10**12))),
    Row("checkpoint", "config.json 的层数多于权重里的", "config.json claiming more layers than the weights hold",
        ("budget", "--model", "{t}/ckpt"), "num_hidden_layers is 2 but the *.safetensors hold 0 layers",
        checkpoint(lambda c: None)),
    Row("checkpoint", "--init-method 却没有 --tp", "--init-method without --tp",
        ("trace", "--preset", "tiny", "--init-method", "tcp://127.0.0.1:1", "--out", "{t}/out"),
        "only a --tp run"),
    Row("checkpoint", "--init-method 的文件在 /proc 下", "--init-method file:// under /proc",
        ("trace", "--preset", "tiny", "--tp", "2", "--init-method", "file:///proc/annotate-rdv/x", "--out", "{t}/out"),
        "--init-method file:///proc/annotate-rdv/x: the ranks cannot make their store in /proc/annotate-rdv"),
    Row("checkpoint", "--init-method 的文件夹不存在", "--init-method file:// in a folder that does not exist",
        ("trace", "--preset", "tiny", "--tp", "2", "--init-method", "file:///nonexistent-dir/a/b", "--out", "{t}/out"),
        "the ranks cannot make their store in /nonexistent-dir/a (No such file or directory)"),
    Row("checkpoint", "环境里留着 RANK/WORLD_SIZE 却没有 MASTER_ADDR", "RANK=0 WORLD_SIZE=2 left set without MASTER_ADDR",
        ("trace", "--preset", "tiny", "--tp", "2", "--out", "{t}/out"),
        "RANK=0 WORLD_SIZE=2 are set but MASTER_ADDR and MASTER_PORT are not",
        env=(("RANK", "0"), ("WORLD_SIZE", "2"), ("MASTER_ADDR", None), ("MASTER_PORT", None))),
    Row("checkpoint", "torchrun 的主机接受连接却从不应答", "a torchrun rendezvous host that accepts and never answers",
        ("trace", "--preset", "tiny", "--tp", "2", "--out", "{t}/out"),
        "--tp 2: the ranks did not meet at the rendezvous env:// within 3 s (its store did not answer); "
        "check MASTER_ADDR:MASTER_PORT", silent_port,
        env=(("RANK", "1"), ("WORLD_SIZE", "2"), ("MASTER_ADDR", "127.0.0.1"), ("MASTER_PORT", "{port}"),
             ("ANNOTATE_RENDEZVOUS_TIMEOUT", "3"))),
    Row("checkpoint", "会合时限不是秒数", "a rendezvous limit that is not seconds",
        ("trace", "--preset", "tiny", "--tp", "2", "--out", "{t}/out"),
        "ANNOTATE_RENDEZVOUS_TIMEOUT='soon': expected the seconds the --tp ranks may take to meet",
        env=(("ANNOTATE_RENDEZVOUS_TIMEOUT", "soon"), ("RANK", None), ("WORLD_SIZE", None))),
    # experiments (experiments/NAME.yml): refused before anything is traced or written
    Row("experiment", "没有这个实验文件", "no such experiment file", ("experiment", "nope"),
        "experiment 'nope': no experiments/nope.yml"),
    Row("experiment", "改动的锚点已消失", "an edit whose anchor vanished", ("experiment", "x"),
        "experiments/x.yml: edit 1: nanovllm/layers/layernorm.py: RMSNorm.gone › 'x = x.float()': vanished",
        write("experiments/x.yml", _EXPERIMENT.format(symbol="RMSNorm.gone", replace="x = x.float().clone()").encode())),
    Row("experiment", "替换语句无法解析", "a replacement that does not parse", ("experiment", "x"),
        "experiments/x.yml: edit 1: the edited nanovllm/layers/layernorm.py does not parse",
        write("experiments/x.yml", _EXPERIMENT.format(symbol="RMSNorm.rms_forward", replace="'x = (x'").encode())),
    Row("experiment", "实验文件没有改动", "an experiment file without edits", ("experiment", "x"),
        "experiments/x.yml: $.edits: expected at least one edit, got none",
        write("experiments/x.yml", b"title: {zh: t, en: t}\nedits: []\n")),
    Row("experiment", "替换语句是 raise SystemExit(0)", "a replacement `raise SystemExit(0)`", ("experiment", "x", "--quiet"),
        "experiments/x.yml: the edited model exited at nanovllm/layers/layernorm.py:",
        write("experiments/x.yml", _EXPERIMENT.format(symbol="RMSNorm.rms_forward",
                                                      replace='"raise SystemExit(0)"').encode()), fresh=True),
    Row("experiment", "替换语句是 os._exit(0)", "a replacement `import os; os._exit(0)`", ("experiment", "x", "--quiet"),
        "(os._exit(0)) before its trace was written",
        write("experiments/x.yml", _EXPERIMENT.format(symbol="RMSNorm.rms_forward",
                                                      replace='["import os", "os._exit(0)"]').encode()), fresh=True),
    Row("experiment", "实验文件是指向别处的符号链接", "an experiment file that is a symlink elsewhere",
        ("check", "--no-claims", "--no-math"), "experiments/x.yml: is a symbolic link", linked_experiment),
    Row("experiment", "实验文件名含 HTML 字符（构建）", "an experiment file named with HTML characters (build)",
        ("build", "--site-dir", "{t}/site"), "experiments/<i>x.yml: the name '<i>x' holds characters",
        write("experiments/<i>x.yml", _EXPERIMENT.format(symbol="RMSNorm.rms_forward", replace="x = x.double()").encode())),
    Row("experiment", "实验轨迹换入时构建", "a build while an experiment's trace is being swapped in",
        ("build", "--site-dir", "{t}/site"), "traces/experiments/x: another annotate run is replacing it",
        mid_swap("traces/experiments/x")),
    Row("experiment", "标题含控制字符", "a title holding a control character", ("check", "--no-claims", "--no-math"),
        "experiments/x.yml: $.title.en: expected printable text (no control characters)",
        write("experiments/x.yml", _EXPERIMENT.replace("en: experiment", 'en: "a\\x1bb"').format(
            symbol="RMSNorm.rms_forward", replace="x = x.double()").encode())),
)
