"""The vendor lock: upstream facts (blob ids, per-line hashes) and where the local copy comes from.

The lock is data, never code: it pins *facts about* upstream so that no upstream file is ever
committed. See docs/guide/vendoring.md, "The lock format", for the format.
"""
from __future__ import annotations

import builtins
import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from annotate import codec
from annotate.atomic import atomic_write_text
from annotate.errors import UserError
from annotate.project import Project

LOCK_FORMAT = 1
#: the primary upstream: the one traced, and the one a short reference tail means
PRIMARY = "nano-vllm"
LOCK_SUFFIX = ".lock.json"


def upstream_dir(name: str) -> str:
    """An upstream's materialised folder, project-relative: ``vendor/<name>`` (the one rule)."""
    return f"{Project.VENDOR_DIR}/{name}"


def upstream_lock(name: str) -> str:
    """An upstream's lock file, project-relative: ``vendor/<name>.lock.json`` (the one rule)."""
    return f"{upstream_dir(name)}{LOCK_SUFFIX}"


#: the primary upstream's lock and folder (the rule above applied to it)
LOCK_NAME = upstream_lock(PRIMARY)
VENDOR_DIR = upstream_dir(PRIMARY)


def line_hashes(data: bytes) -> list[str]:
    """First 16 hex digits of sha256 over each line's bytes, line ending excluded."""
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return [hashlib.sha256(line.rstrip(b"\r")).hexdigest()[:16] for line in lines]


def blob_id(data: bytes) -> str:
    """The id `git hash-object` gives these bytes: equality means "identical file"."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class UpstreamFile:
    """Facts about one upstream file at the pinned commit."""

    blob: str
    bytes: int
    line_hashes: tuple[str, ...]

    @classmethod
    def of(cls, data: builtins.bytes) -> UpstreamFile:
        return cls(blob=blob_id(data), bytes=len(data), line_hashes=tuple(line_hashes(data)))

    def to_json(self) -> dict[str, Any]:
        return {"blob": self.blob, "bytes": self.bytes, "lines": len(self.line_hashes),
                "line_sha256_16": list(self.line_hashes)}


@dataclass(frozen=True)
class Upstream:
    """The pinned upstream commit (or, where no full commit is known, a tag) and its files' facts.

    ``repo_path`` is the folder the vendored paths live under in the upstream repository
    (``src/`` for HF transformers, whose wheel drops it); permalinks put it back.
    """

    repo: str
    commit: str
    committed: str
    subject: str
    files: dict[str, UpstreamFile]
    tag: str = ""  # the release tag, when the full commit cannot be established (commit is then "")
    repo_path: str = ""  # prefix of the vendored paths inside the upstream repository ("" or "src/")
    built_from: str = ""  # what the source artifact says it was built from (a short commit id), as a fact

    @property
    def ref(self) -> str:
        """What permalinks pin: the full commit when known, else the commit the artifact says it was built
        from (vLLM's wheel names one in `_version.py`), else the tag (HF's wheel names no commit)."""
        return self.commit or self.built_from or self.tag

    @property
    def pin_words(self) -> str:
        """How exact the pin is, in the page's words (Chinese first)."""
        if self.commit:
            return f"提交 commit {self.commit[:10]}"
        if self.built_from:
            return (f"标签 tag {self.tag}；wheel 构建自提交 built from commit {self.built_from}，链接指向该提交 "
                    "links point at that commit")
        return f"标签 tag {self.tag} (完整提交未知 full commit not established；链接指向标签 links point at the tag)"

    def permalink(self, path: str, start: int, end: int | None = None) -> str:
        """`…/blob/<full sha or tag>/<repo path><path>#L<a>-L<b>` for upstream lines (not local ones: see linemap)."""
        anchor = f"#L{start}" if end is None or end == start else f"#L{start}-L{end}"
        return f"{self.file_url(path)}{anchor}"

    def file_url(self, path: str) -> str:
        """The upstream file at the pin."""
        return f"{self.repo.rstrip('/')}/blob/{self.ref}/{self.repo_path}{path}"

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"repo": self.repo, "commit": self.commit}
        data.update({k: v for k, v in (("tag", self.tag), ("repo_path", self.repo_path),
                                        ("built_from", self.built_from)) if v})
        data.update({"committed": self.committed, "subject": self.subject,
                     "line_hash": "first 16 hex digits of sha256 over the line's bytes, line ending excluded",
                     "files": {p: f.to_json() for p, f in sorted(self.files.items())}})
        return data


@dataclass(frozen=True)
class Source:
    """Where the local copy comes from: a registry wheel or a git checkout, plus local file hashes."""

    kind: str  # "wheel" or "git"
    name: str = ""  # wheel: distribution name
    version: str = ""  # wheel: version
    sha256: str = ""  # wheel: artifact hash, verified before the wheel is read
    url: str = ""  # git: URL or local path
    commit: str = ""  # git: full commit
    files: dict[str, str] = field(default_factory=dict)  # local path -> sha256 of the materialised file
    include: tuple[str, ...] = ()  # the members to take (exact paths); () = nano-vllm's package and LICENSE
    subdir: str = ""  # git: the folder of the tree the vendored paths live under ("src/" in HF's repository)

    def describe(self) -> str:
        if self.kind == "wheel":
            return f"wheel {self.name}=={self.version} (sha256 {self.sha256[:12]}…)"
        return f"git {self.url} @ {self.commit[:12]}"

    def with_files(self, files: dict[str, str]) -> Source:
        return Source(self.kind, self.name, self.version, self.sha256, self.url, self.commit, dict(files),
                      self.include, self.subdir)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"kind": self.kind}
        if self.kind == "wheel":
            data.update(name=self.name, version=self.version, sha256=self.sha256)
        else:
            data.update(url=self.url, commit=self.commit)
        if self.include:
            data["include"] = list(self.include)
        if self.subdir:
            data["subdir"] = self.subdir
        data["files"] = dict(sorted(self.files.items()))
        return data


@dataclass(frozen=True)
class Lock:
    upstream: Upstream
    source: Source

    def to_json(self) -> dict[str, Any]:
        return {"format": LOCK_FORMAT, "upstream": self.upstream.to_json(), "source": self.source.to_json()}


def read_lock(path: Path) -> Lock:
    """Read and validate the lock; any problem is one UserError line naming the file and the fix."""
    if not path.is_file():
        raise UserError(f"{path}: lock file missing; restore it with `git checkout -- {_committed(path)}`")
    return lock_from_json(codec.read_json(path, fix=_lock_fix(path)), path)


def _committed(path: Path | str) -> str:
    """The lock as git knows it: ``vendor/<name>.lock.json`` (locks live in the vendor folder)."""
    return f"{Project.VENDOR_DIR}/{Path(path).name}"


def _lock_fix(path: Path | str) -> str:
    return f"fix it or restore it with `git checkout -- {_committed(path)}`"

HTTPS_URL = r"https://[A-Za-z0-9.-]+(?::[0-9]+)?(?:/[A-Za-z0-9._~%+@:/-]*)?"
#: a git source: a URL git understands or a local path; never something git would read as an option
GIT_SOURCE = r"(?:(?:https?|ssh|git|file)://[^\s\"'<>]+|[^-\s\"'<>][^\s\"'<>]*)"
HEX40, HEX64, HEX16 = r"[0-9a-f]{40}", r"[0-9a-f]{64}", r"[0-9a-f]{16}"


def safe_relative(value: Any, at: codec.At) -> str:
    """A lock key: a relative POSIX path that stays inside the vendor root (no ``..``, no ``/x``, no ``\\``)."""
    name = codec.string(value, at)
    parts = name.split("/")
    if (not name or name.startswith("/") or "\\" in name or "\0" in name or re.match(r"^[A-Za-z]:", name)
            or any(p in ("", ".", "..") for p in parts)):
        at.fail("a relative POSIX path inside the vendor folder (like nanovllm/config.py)", value)
    return name


def _paths_of(decode):
    def run(value: Any, at: codec.At) -> dict:
        out = {}
        for key, item in codec.obj(value, at).items():
            safe_relative(key, at.key(key))
            out[key] = decode(item, at.key(key))
        return out
    return run


def _upstream_file(value: Any, at: codec.At) -> UpstreamFile:
    facts = codec.obj(value, at)
    hex16 = lambda v, a: codec.string(v, a, HEX16, "16 lowercase hex digits")  # noqa: E731
    hashes = codec.field(facts, "line_sha256_16", at, codec.list_of(hex16))
    size = codec.field(facts, "bytes", at, lambda v, a: codec.integer(v, a, 0), 0)
    lines = codec.field(facts, "lines", at, lambda v, a: codec.integer(v, a, 0), len(hashes))
    if lines != len(hashes):
        at.key("lines").fail(f"{len(hashes)} (the number of line hashes)", lines)
    return UpstreamFile(codec.field(facts, "blob", at, lambda v, a: codec.string(v, a, HEX40, "a 40-hex git blob id")),
                        size, tuple(hashes))


def lock_from_json(data: Any, path: Path | str = LOCK_NAME) -> Lock:
    """The typed lock, validated field by field: each error names the JSON path and what was expected."""
    at = codec.At(str(path), fix=_lock_fix(path))
    top = codec.obj(data, at)
    fmt = codec.field(top, "format", at, codec.integer)
    if fmt != LOCK_FORMAT:
        raise UserError(f"{path}: lock format {fmt!r} is not supported (expected {LOCK_FORMAT})")
    up_at = at.key("upstream")
    up = codec.field(top, "upstream", at, codec.obj)
    tag = codec.field(up, "tag", up_at, lambda v, a: codec.string(v, a, r"[A-Za-z0-9][A-Za-z0-9._+-]*", "a tag name"), "")
    commit_pattern = f"(?:{HEX40})?" if tag else HEX40  # a tag stands in only where no full commit is known
    upstream = Upstream(
        repo=codec.field(up, "repo", up_at, lambda v, a: codec.string(v, a, HTTPS_URL, "an https:// URL of the repository")),
        commit=codec.field(up, "commit", up_at, lambda v, a: codec.string(v, a, commit_pattern, "a full 40-hex commit")),
        committed=codec.field(up, "committed", up_at, codec.string, ""),
        subject=codec.field(up, "subject", up_at, codec.string, ""),
        files=codec.field(up, "files", up_at, _paths_of(_upstream_file)),
        tag=tag,
        repo_path=codec.field(up, "repo_path", up_at,
                              lambda v, a: codec.string(v, a, r"(?:[A-Za-z0-9_][A-Za-z0-9_.-]*/)*", "a folder like src/"), ""),
        built_from=codec.field(up, "built_from", up_at, lambda v, a: codec.string(v, a, r"[0-9a-f]{7,40}", "a commit id"), ""))
    src_at = at.key("source")
    src = codec.field(top, "source", at, codec.obj)
    kind = codec.field(src, "kind", src_at, codec.string)
    text = lambda pattern, what: lambda v, a: codec.string(v, a, pattern, what)  # noqa: E731
    if kind == "wheel":
        extra = dict(name=codec.field(src, "name", src_at, text(r"[A-Za-z0-9._-]+", "a distribution name")),
                     version=codec.field(src, "version", src_at, text(r"[A-Za-z0-9.+!_-]+", "a version")),
                     sha256=codec.field(src, "sha256", src_at, text(HEX64, "a 64-hex sha256")))
    elif kind == "git":
        extra = dict(url=codec.field(src, "url", src_at, text(GIT_SOURCE, "a git URL or a local path")),
                     commit=codec.field(src, "commit", src_at, text(HEX40, "a full 40-hex commit")))
    else:
        raise UserError(f"{path}: source.kind {kind!r} is unknown; use \"wheel\" or \"git\"")
    files = codec.field(src, "files", src_at, _paths_of(text(HEX64, "a 64-hex sha256")), {})
    include = codec.field(src, "include", src_at, codec.list_of(safe_relative), [])
    subdir = codec.field(src, "subdir", src_at, text(r"(?:[A-Za-z0-9_][A-Za-z0-9_.-]*/)*", "a folder like src/"), "")
    if files:
        unlisted = sorted(set(upstream.files) - set(files))
        if unlisted:
            src_at.key("files").fail(f"an entry for every upstream file (missing {unlisted[0]})", "fewer")
    return Lock(upstream=upstream, source=Source(kind=kind, files=files, include=tuple(include), subdir=subdir, **extra))


def lock_text(lock: Lock) -> str:
    """The lock as it is written to disk (stable key order, one space indent, UTF-8 as is)."""
    return json.dumps(lock.to_json(), indent=1, ensure_ascii=False) + "\n"


def write_lock(path: Path, lock: Lock) -> None:
    """Write the lock atomically, after checking that it reads back (writer and reader share one model)."""
    text = lock_text(lock)
    lock_from_json(json.loads(text), path)
    atomic_write_text(path, text)
