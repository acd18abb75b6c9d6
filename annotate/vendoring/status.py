"""`annotate vendor status`: what the reader is reading, file by file."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from annotate.vendoring import linemap
from annotate.vendoring.lock import Lock, sha256_bytes
from annotate.vendoring.registry import NANO_VLLM, Vendor
from annotate.vendoring.sync import local_paths


@dataclass(frozen=True)
class FileStatus:
    path: str
    state: str  # identical | differs | missing | local-only file
    local_only: list[tuple[int, int]] = field(default_factory=list)  # local line ranges with no upstream line
    modified: bool = False  # bytes differ from what the lock's source gave (a hand edit)

    def describe(self) -> str:
        text = {"identical": "identical to upstream",
                "differs": f"differs; local-only lines {linemap.format_ranges(self.local_only)}"
                if self.local_only else "differs (same lines, other line endings or order)",
                "missing": "missing locally (run `annotate vendor sync`)",
                "local-only file": "local-only file (not in upstream)"}[self.state]
        return text + ("  [MODIFIED since sync: `annotate vendor sync` restores it]" if self.modified else "")


@dataclass(frozen=True)
class Status:
    repo: str
    commit: str
    committed: str
    source: str
    files: list[FileStatus]
    name: str = NANO_VLLM.name  # the upstream (vendor/<name>.lock.json)
    pin: str = ""  # what permalinks pin: the full commit, or the tag where no commit is known

    @property
    def modified(self) -> list[str]:
        return [f.path for f in self.files if f.modified]

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["modified"] = self.modified
        return data


def status(root: Path, lock: Lock, upstream: Vendor = NANO_VLLM) -> Status:
    vendor = root / upstream.dir
    names = sorted(set(lock.upstream.files) | set(lock.source.files) | set(local_paths(vendor)))
    return Status(repo=lock.upstream.repo, commit=lock.upstream.commit, committed=lock.upstream.committed,
                  source=lock.source.describe(), files=[file_status(vendor, name, lock) for name in names],
                  name=upstream.name, pin=lock.upstream.pin_words)


def file_status(vendor: Path, name: str, lock: Lock) -> FileStatus:
    path = vendor / name
    if not path.is_file():
        return FileStatus(name, "missing", modified=name in lock.source.files)
    data = path.read_bytes()
    return status_of(name, data, lock, linemap.build(name, data, lock.upstream))


def status_of(name: str, data: bytes, lock: Lock, lmap: linemap.LineMap) -> FileStatus:
    """The status of vendored file ``name`` from its bytes and its line map (both already at hand)."""
    recorded = lock.source.files.get(name)
    modified = recorded is not None and sha256_bytes(data) != recorded or (recorded is None and bool(lock.source.files))
    if name not in lock.upstream.files:
        return FileStatus(name, "local-only file", modified=modified)
    if lmap.identical:
        return FileStatus(name, "identical", modified=modified)
    return FileStatus(name, "differs", local_only=lmap.local_only(), modified=modified)


def render(report: Status) -> str:
    """Human-readable status: the pin, the source, then one line per file."""
    pin = (f"commit    {report.commit}  ({report.committed})" if report.commit
           else f"pin       {report.pin}")
    lines = [f"upstream  {report.repo}", pin, f"source    {report.source}", ""]
    width = max((len(f.path) for f in report.files), default=10)
    lines += [f"  {f.path:<{width}}  {f.describe()}" for f in report.files]
    same = sum(f.state == "identical" for f in report.files)
    lines += ["", f"{same} of {len(report.files)} files identical to upstream"]
    if report.modified:
        lines.append(f"{len(report.modified)} file(s) differ from the lock: run `annotate vendor sync` to restore them")
    return "\n".join(lines)


def render_all(reports: list[Status]) -> str:
    """Every upstream's status, each under a heading naming its lock."""
    return "\n\n".join(f"== {r.name} (vendor/{r.name}.lock.json) ==\n{render(r)}" for r in reports)
