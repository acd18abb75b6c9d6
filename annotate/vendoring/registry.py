"""The upstreams this project vendors: one home, the set of ``vendor/<name>.lock.json`` files.

Each upstream has its own lock (facts only) and its own materialised, git-ignored folder
``vendor/<name>/``. Vendored paths are global across upstreams (``nanovllm/models/qwen3.py``,
``transformers/models/qwen3/modeling_qwen3.py``): notes, references and pages name a file by that
path alone, and the registry says which upstream holds it. Two upstreams may not share a path.

nano-vllm is the *primary* upstream: the one the tool traces, and the one a short reference tail
(``qwen3.py``) means when several upstreams have a file of that name.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from annotate.errors import UserError
from annotate.project import Project
from annotate.vendoring.lock import LOCK_SUFFIX, PRIMARY, Lock, read_lock, upstream_dir, upstream_lock


@dataclass(frozen=True)
class Vendor:
    """One upstream: its name, its lock file and its vendor folder (both project-relative)."""

    name: str

    @property
    def lock_name(self) -> str:
        return upstream_lock(self.name)

    @property
    def dir(self) -> str:
        return upstream_dir(self.name)

    @property
    def primary(self) -> bool:
        return self.name == PRIMARY


NANO_VLLM = Vendor(PRIMARY)


def vendors(root: Path) -> list[Vendor]:
    """Every upstream with a lock under ``vendor/``, the primary first (it is listed even without a lock)."""
    names = sorted(p.name[: -len(LOCK_SUFFIX)] for p in (root / Project.VENDOR_DIR).glob(f"*{LOCK_SUFFIX}") if p.is_file())
    return [NANO_VLLM] + [Vendor(n) for n in names if n != PRIMARY]


@dataclass
class Registry:
    """The upstreams of one project with their locks, read once; which upstream holds a path."""

    root: Path
    locks: dict[str, Lock] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.all = vendors(self.root)
        self._owner: dict[str, Vendor] = {}
        for vendor in self.all:
            lock = self.lock(vendor)
            for path in sorted(set(lock.upstream.files) | set(lock.source.files)):   # the first path, every run
                other = self._owner.setdefault(path, vendor)
                if other != vendor:
                    raise UserError(f"{vendor.lock_name}: {path} is also vendored by {other.lock_name}; "
                                    "two upstreams cannot share a path (vendor a different file)")

    def lock(self, vendor: Vendor) -> Lock:
        if vendor.name not in self.locks:
            self.locks[vendor.name] = read_lock(self.root / vendor.lock_name)
        return self.locks[vendor.name]

    def owner(self, path: str) -> Vendor:
        """The upstream whose lock lists ``path``; a file no lock lists belongs to the primary folder."""
        return self._owner.get(path, NANO_VLLM)

    def file(self, path: str) -> Path:
        """Where vendored ``path`` is materialised."""
        return self.root / self.owner(path).dir / path
