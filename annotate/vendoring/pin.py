"""A lock for an upstream published as a registry wheel: the facts come from the wheel's own files.

Used to add an upstream (HF transformers, vLLM) whose release tag is known but whose full commit
cannot be established offline: the lock pins the wheel by sha256, takes exactly the listed files,
and records their blob ids and line hashes as the upstream facts at that tag. ``subject`` says so.
"""
from __future__ import annotations

from pathlib import Path

from annotate.vendoring.lock import Lock, Source, Upstream, UpstreamFile, sha256_bytes
from annotate.vendoring.sources import sha256_file, wheel_files


def lock_from_wheel(wheel: Path, name: str, version: str, include: list[str], repo: str, tag: str,
                    repo_path: str = "", built_from: str = "") -> Lock:
    """The lock of ``include`` (exact member paths) from ``wheel``, pinned at ``tag`` of ``repo``."""
    source = Source(kind="wheel", name=name, version=version, sha256=sha256_file(wheel), include=tuple(include))
    files = wheel_files(wheel, source.sha256, frozenset(include).__contains__)
    missing = sorted(set(include) - set(files))
    if missing:
        raise ValueError(f"{wheel}: has no {missing[0]}")
    upstream = Upstream(repo=repo, commit="", committed="", tag=tag, repo_path=repo_path, built_from=built_from,
                        subject=f"facts computed from the files of {name}=={version} (the {tag} release)",
                        files={p: UpstreamFile.of(b) for p, b in files.items()})
    return Lock(upstream, source.with_files({p: sha256_bytes(b) for p, b in files.items()}))
