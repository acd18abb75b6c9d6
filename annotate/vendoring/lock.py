"""The vendor lock: upstream facts (blob ids, per-line hashes) and where the local copy comes from.

The lock is data, never code: it pins *facts about* upstream so that no upstream file is ever
committed. See README.md, "The vendor lock", for the format.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from annotate.atomic import atomic_write_text
from annotate.errors import UserError

LOCK_FORMAT = 1
LOCK_NAME = "vendor/nano-vllm.lock.json"
VENDOR_DIR = "vendor/nano-vllm"


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
    def of(cls, data: bytes) -> UpstreamFile:
        return cls(blob=blob_id(data), bytes=len(data), line_hashes=tuple(line_hashes(data)))

    def to_json(self) -> dict[str, Any]:
        return {"blob": self.blob, "bytes": self.bytes, "lines": len(self.line_hashes),
                "line_sha256_16": list(self.line_hashes)}


@dataclass(frozen=True)
class Upstream:
    """The pinned upstream commit and its files' facts."""

    repo: str
    commit: str
    committed: str
    subject: str
    files: dict[str, UpstreamFile]

    def permalink(self, path: str, start: int, end: int | None = None) -> str:
        """`…/blob/<full sha>/<path>#L<a>-L<b>` for upstream lines (not local ones: see linemap)."""
        anchor = f"#L{start}" if end is None or end == start else f"#L{start}-L{end}"
        return f"{self.repo.rstrip('/')}/blob/{self.commit}/{path}{anchor}"

    def to_json(self) -> dict[str, Any]:
        return {"repo": self.repo, "commit": self.commit, "committed": self.committed,
                "subject": self.subject,
                "line_hash": "first 16 hex digits of sha256 over the line's bytes, line ending excluded",
                "files": {p: f.to_json() for p, f in sorted(self.files.items())}}


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

    def describe(self) -> str:
        if self.kind == "wheel":
            return f"wheel {self.name}=={self.version} (sha256 {self.sha256[:12]}…)"
        return f"git {self.url} @ {self.commit[:12]}"

    def with_files(self, files: dict[str, str]) -> Source:
        return Source(self.kind, self.name, self.version, self.sha256, self.url, self.commit, dict(files))

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"kind": self.kind}
        if self.kind == "wheel":
            data.update(name=self.name, version=self.version, sha256=self.sha256)
        else:
            data.update(url=self.url, commit=self.commit)
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
        raise UserError(f"{path}: lock file missing; restore it with `git checkout -- {LOCK_NAME}`")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise UserError(f"{path}:{exc.lineno}:{exc.colno}: invalid JSON ({exc.msg}); fix it or restore it from git") from None
    return lock_from_json(data, path)


def lock_from_json(data: Any, path: Path | str = LOCK_NAME) -> Lock:
    _require(data, ("format", "upstream", "source"), path, "")
    if data["format"] != LOCK_FORMAT:
        raise UserError(f"{path}: lock format {data['format']!r} is not supported (expected {LOCK_FORMAT})")
    up = data["upstream"]
    _require(up, ("repo", "commit", "files"), path, "upstream.")
    files = {}
    for name, facts in up["files"].items():
        _require(facts, ("blob", "line_sha256_16"), path, f"upstream.files[{name!r}].")
        files[name] = UpstreamFile(facts["blob"], int(facts.get("bytes", 0)), tuple(facts["line_sha256_16"]))
    src = data["source"]
    _require(src, ("kind",), path, "source.")
    if src["kind"] == "wheel":
        _require(src, ("name", "version", "sha256"), path, "source.")
    elif src["kind"] == "git":
        _require(src, ("url", "commit"), path, "source.")
    else:
        raise UserError(f"{path}: source.kind {src['kind']!r} is unknown; use \"wheel\" or \"git\"")
    source = Source(kind=src["kind"], name=src.get("name", ""), version=src.get("version", ""),
                    sha256=src.get("sha256", ""), url=src.get("url", ""), commit=src.get("commit", ""),
                    files=dict(src.get("files", {})))
    upstream = Upstream(repo=up["repo"], commit=up["commit"], committed=up.get("committed", ""),
                        subject=up.get("subject", ""), files=files)
    return Lock(upstream=upstream, source=source)


def _require(obj: Any, keys: tuple[str, ...], path: Path | str, prefix: str) -> None:
    if not isinstance(obj, dict):
        raise UserError(f"{path}: {prefix.rstrip('.') or 'top level'} must be a JSON object")
    missing = [k for k in keys if k not in obj]
    if missing:
        names = ", ".join(prefix + k for k in missing)
        raise UserError(f"{path}: missing key{'s' if len(missing) > 1 else ''} {names}; see README 'The vendor lock'")


def lock_text(lock: Lock) -> str:
    """The lock as it is written to disk (stable key order, one space indent, UTF-8 as is)."""
    return json.dumps(lock.to_json(), indent=1, ensure_ascii=False) + "\n"


def write_lock(path: Path, lock: Lock) -> None:
    atomic_write_text(path, lock_text(lock))
