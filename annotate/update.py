"""`annotate vendor update`: move the pin to another upstream commit and say what every anchor does.

This room sits above notes: it composes the vendoring (lock, git source, staging), the source
model and the anchors held by notes and prose pages; the vendoring room itself knows none of them.

Planning reads the new commit from git (never from a work tree), recomputes the lock's upstream
facts from those exact bytes, and resolves every note and prose reference against the old local
copy and the new files. Applying is atomic: the new vendor folder is staged beside the old one and
the new lock written to a temp file before anything is renamed; on any failure the previous vendor
copy and lock stay as they were.
"""
from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from annotate import source as pysource
from annotate.anchors import (AMBIGUOUS, CHANGED, EXACT, MOVED, VANISHED, Anchor, occurrences_text, compare,
                              nearest_text, resolve)
from annotate.atomic import stage_file
from annotate.errors import UserError
from annotate.project_anchors import all_anchors
from annotate.vendoring import linemap
from annotate.vendoring.lock import (
    HTTPS_URL,
    Lock,
    Source,
    Upstream,
    UpstreamFile,
    lock_from_json,
    lock_text,
    read_lock,
    sha256_bytes,
)
from annotate.vendoring.registry import NANO_VLLM, Vendor
from annotate.vendoring.sources import GitCommit, read_git, wanted
from annotate.vendoring.sync import stage, vendor_writer

UNCHANGED = "unchanged"
#: Files a commit must have to be a nano-vllm tree at all (anything else may come and go).
REQUIRED = ("LICENSE", "nanovllm/__init__.py")
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://|^[\w.-]+@[\w.-]+:")

AnchorCollector = Callable[[Path], Iterable[Anchor]]


@dataclass(frozen=True)
class FileChange:
    """One vendored file that differs between the old pin and the new one."""

    path: str
    state: str  # added | removed | changed
    old_lines: int | None = None  # upstream line counts
    new_lines: int | None = None
    upstream_changed: bool = True  # the upstream blob differs between the two pins
    local_changed: bool = True  # the bytes in vendor/nano-vllm differ between the two pins

    def describe(self) -> str:
        if self.state != "changed":
            return {"added": f"new file ({self.new_lines} lines)", "removed": "removed upstream"}[self.state]
        if not self.upstream_changed:
            return f"local copy replaced by the upstream bytes ({self.new_lines} lines)"
        if not self.local_changed:
            return f"upstream {self.old_lines} → {self.new_lines} lines; the local copy already had these bytes"
        return f"{self.old_lines} → {self.new_lines} lines"


@dataclass(frozen=True)
class AnchorReport:
    """What one note or prose reference does across the update."""

    anchor: Anchor
    state: str  # unchanged | moved | changed | vanished | ambiguous
    was: str  # its resolution in the old local copy: exact | changed | vanished | unknown
    old_span: tuple[int, int] | None = None
    new_span: tuple[int, int] | None = None
    candidates: tuple[tuple[int, str], ...] = ()
    old_permalink: str | None = None
    new_permalink: str | None = None

    @property
    def ok(self) -> bool:
        return self.state in (UNCHANGED, MOVED)

    def describe(self) -> str:
        if self.state == UNCHANGED:
            text = f"line {_span(self.new_span)}"
        elif self.state == MOVED:
            text = f"line {_span(self.old_span)} → {_span(self.new_span)}"
        elif self.state == CHANGED:
            text = (f"statement not found in {self.anchor.symbol or 'module level'}; "
                    f"nearest: {nearest_text(self.candidates)}")
        elif self.state == AMBIGUOUS:
            text = occurrences_text(self.anchor, self.candidates)
        else:
            text = f"symbol {self.anchor.symbol!r} is gone" if self.anchor.symbol else "file is gone"
        if self.was not in (EXACT, MOVED, "unknown"):
            text += f"  (already {self.was} before the update)"
        return text

    def to_json(self) -> dict[str, Any]:
        a = self.anchor
        return {"path": a.path, "symbol": a.symbol, "statement": a.statement, "nth": a.nth,
                "origin": a.origin, "state": self.state, "was": self.was,
                "old_span": list(self.old_span) if self.old_span else None,
                "new_span": list(self.new_span) if self.new_span else None,
                "candidates": [{"line": line, "text": text} for line, text in self.candidates],
                "old_permalink": self.old_permalink, "new_permalink": self.new_permalink}


@dataclass(frozen=True)
class UpdatePlan:
    """Everything `apply_update` writes, and the report; made without touching the project."""

    old: Lock
    new: Lock
    files: dict[str, bytes] = field(repr=False)
    file_changes: tuple[FileChange, ...]
    anchors: tuple[AnchorReport, ...]
    lock_sha256: str  # the lock the plan was made from; apply refuses if it changed since
    warnings: tuple[str, ...] = ()
    upstream: Vendor = NANO_VLLM  # whose pin moves

    @property
    def needs_fixing(self) -> list[AnchorReport]:
        return [r for r in self.anchors if not r.ok]

    def counts(self) -> dict[str, int]:
        states = (UNCHANGED, MOVED, CHANGED, VANISHED, AMBIGUOUS)
        found = {s: sum(r.state == s for r in self.anchors) for s in states}
        return {s: n for s, n in found.items() if n or s != AMBIGUOUS}   # "0 ambiguous" says nothing

    def to_json(self) -> dict[str, Any]:
        return {"from": _pin_json(self.old), "to": _pin_json(self.new),
                "files": [vars(c) | {"describe": c.describe()} for c in self.file_changes],
                "anchors": [r.to_json() for r in self.anchors], "counts": self.counts(),
                "needs_fixing": len(self.needs_fixing), "warnings": list(self.warnings)}


# --- planning -------------------------------------------------------------------------------------


def plan_update(root: Path, url_or_path: str, rev: str, repo_url: str | None = None,
                anchors: AnchorCollector | None = None, upstream: Vendor = NANO_VLLM) -> UpdatePlan:
    """Read ``rev`` from the git source and plan the update of ``root``'s pin of ``upstream`` to it."""
    lock = read_lock(root / upstream.lock_name)  # a broken lock is reported before any slow work
    return plan_from_commit(root, read_source(url_or_path, rev, lock, upstream), url_or_path, repo_url, anchors,
                            upstream)


def read_source(url_or_path: str, rev: str, lock: Lock | None = None, upstream: Vendor = NANO_VLLM) -> GitCommit:
    """The commit's wanted files; refuses a missing folder, a non-repository, a dirty checkout, a bad rev.

    nano-vllm takes its whole package; another upstream exactly the files its lock includes, read
    from the repository folder its permalinks name (``src/`` for HF transformers).
    """
    if not upstream.primary and lock is not None:
        return _read_included(url_or_path, rev, lock)
    _refuse_non_repo(url_or_path, "nano-vllm")
    commit = read_git(url_or_path, rev, allow_dirty=False)
    missing = [name for name in REQUIRED if name not in commit.files]
    if missing:
        raise UserError(f"{url_or_path} @ {commit.commit[:12]}: lacks {', '.join(missing)}; "
                        "that commit is not a nano-vllm tree: pass a commit of nano-vllm to --rev")
    return commit


def plan_from_commit(root: Path, commit: GitCommit, url_or_path: str, repo_url: str | None = None,
                     anchors: AnchorCollector | None = None, upstream: Vendor = NANO_VLLM) -> UpdatePlan:
    """Build the new lock from ``commit`` and report every anchor and file against the old pin.

    Only the anchors into this upstream's files are reported (another upstream's notes are not its business).
    """
    lock_path = root / upstream.lock_name
    lock_bytes = lock_path.read_bytes()
    old = read_lock(lock_path)
    new = new_lock(old, commit, url_or_path, repo_url)
    old_files = _read_vendor(root / upstream.dir, old)
    found, warnings = _collect(root, anchors)
    mine = set(old.upstream.files) | set(old.source.files) | set(commit.files)
    found = [a for a in found if a.path in mine or (upstream.primary and not a.path)]
    if old_files is None:
        warnings.append(f"{upstream.dir} is not materialised: old lines are unknown (run `annotate vendor sync` first "
                        "for a full report)")
    reports = tuple(report_anchors(found, old, old_files or {}, new, commit.files))
    if _is_local(url_or_path):
        warnings.append(f"the lock's source is now the local path {new.source.url}; others can sync only with "
                        "the same path: re-run with the repository URL before committing the lock")
    return UpdatePlan(old=old, new=new, files=dict(commit.files),
                      file_changes=tuple(file_changes(old, new)), anchors=reports,
                      lock_sha256=sha256_bytes(lock_bytes), warnings=tuple(warnings), upstream=upstream)


def _read_included(url_or_path: str, rev: str, lock: Lock) -> GitCommit:
    """The files an include-list upstream's lock names, from ``rev``; every one must be there."""
    _refuse_non_repo(url_or_path)
    subdir = lock.upstream.repo_path
    commit = read_git(url_or_path, rev, allow_dirty=False, want=wanted(lock.source), subdir=subdir)
    missing = sorted(set(lock.source.include) - set(commit.files))
    if missing:
        raise UserError(f"{url_or_path} @ {commit.commit[:12]}: lacks {subdir}{missing[0]}; pass a commit of "
                        f"{lock.upstream.repo} that has every file the lock includes")
    return commit


def _refuse_non_repo(url_or_path: str, name: str = "the upstream") -> None:
    """Refuse a local ``--git`` that is no folder or no git repository (a URL is left to git); ``name``: whose clone."""
    if not _URL.match(url_or_path):
        local = Path(url_or_path).expanduser()
        if not local.is_dir():
            raise UserError(f"{url_or_path}: no such folder; pass a clone of {name} or its URL to --git")
        if _git_dir(local) is None:
            raise UserError(f"{url_or_path}: not a git repository; pass a clone of {name} (git clone URL) or its URL")


def new_lock(old: Lock, commit: GitCommit, url_or_path: str, repo_url: str | None) -> Lock:
    """The lock pinning ``commit``: upstream facts recomputed from its bytes, source = this git source."""
    facts = {path: UpstreamFile.of(data) for path, data in sorted(commit.files.items())}
    upstream = Upstream(repo=permalink_base(url_or_path, repo_url, old.upstream.repo), commit=commit.commit,
                        committed=commit.committed, subject=commit.subject, files=facts,
                        repo_path=old.upstream.repo_path)  # a full commit is known now: no tag needed
    url = str(Path(url_or_path).expanduser().resolve()) if _is_local(url_or_path) else url_or_path
    hashes = {path: sha256_bytes(data) for path, data in sorted(commit.files.items())}
    return Lock(upstream=upstream, source=Source(kind="git", url=url, commit=commit.commit, files=hashes,
                                                 include=old.source.include, subdir=old.upstream.repo_path))


def permalink_base(url_or_path: str, repo_url: str | None, old_repo: str) -> str:
    """``--repo-url``, else the git URL when it is http(s), else the old lock's upstream repo.

    Checked here against the pattern the lock itself requires (:data:`HTTPS_URL`), so the dry run refuses
    what the apply would: an ``http://`` address was planned, then blamed on the lock when written.
    """
    if repo_url is not None:
        if not re.match(r"^https?://[^/\s]+/\S+", repo_url) or not re.fullmatch(HTTPS_URL, _web(repo_url)):
            raise UserError(f"--repo-url {repo_url!r}: not an https:// web address (the lock's permalinks are "
                            "https://); pass the repository's https:// address")
        return _web(repo_url)
    if re.match(r"^https?://", url_or_path):
        if not re.fullmatch(HTTPS_URL, _web(url_or_path)):
            raise UserError(f"--git {url_or_path!r}: its web address is not https://, so it cannot be the lock's "
                            "permalink base; add --repo-url with the repository's https:// address")
        return _web(url_or_path)
    return old_repo


def report_anchors(anchors: Iterable[Anchor], old: Lock, old_files: dict[str, bytes], new: Lock,
                   new_files: dict[str, bytes]) -> list[AnchorReport]:
    """One report per anchor: unchanged / moved / changed / vanished, with lines and permalinks."""
    old_models = _Models(old_files)
    new_models = _Models(new_files)
    known = bool(old_files)
    reports = []
    for anchor in anchors:
        before = resolve(anchor, old_models.get(anchor.path)) if known else None
        after = compare(anchor, old_models.get(anchor.path) if known else None, new_models.get(anchor.path))
        old_span = before.span if before is not None else _hint(anchor)
        reports.append(AnchorReport(
            anchor=anchor, state=UNCHANGED if after.state == EXACT else after.state,
            was=before.state if before is not None else "unknown", old_span=old_span, new_span=after.span,
            candidates=after.candidates, old_permalink=_permalink(old, anchor.path, old_files, old_span),
            new_permalink=_permalink(new, anchor.path, new_files, after.span)))
    return reports


def file_changes(old: Lock, new: Lock) -> list[FileChange]:
    """Files added, removed or changed between the old pin (upstream facts + local copy) and the new one."""
    before = set(old.upstream.files) | set(old.source.files)
    changes = []
    for path in sorted(before | set(new.upstream.files)):
        was, now = old.upstream.files.get(path), new.upstream.files.get(path)
        old_lines = len(was.line_hashes) if was else None
        if now is None:
            changes.append(FileChange(path, "removed", old_lines=old_lines))
        elif path not in before:
            changes.append(FileChange(path, "added", new_lines=len(now.line_hashes)))
        else:
            upstream_changed = was is None or was.blob != now.blob
            local_changed = old.source.files.get(path) != new.source.files.get(path)
            if upstream_changed or local_changed:
                changes.append(FileChange(path, "changed", old_lines, len(now.line_hashes),
                                          upstream_changed, local_changed))
    return changes


# --- applying -------------------------------------------------------------------------------------


def apply_update(root: Path, plan: UpdatePlan) -> None:
    """Write the plan: stage the vendor folder and the lock beside their targets, then swap both.

    On any failure (or interrupt) the previous vendor copy and lock are left exactly as they were.
    """
    with vendor_writer(root, plan.upstream):
        _apply(root, plan)


def _apply(root: Path, plan: UpdatePlan) -> None:
    lock_path, vendor = root / plan.upstream.lock_name, root / plan.upstream.dir
    if not lock_path.is_file() or sha256_bytes(lock_path.read_bytes()) != plan.lock_sha256:
        raise UserError(f"{lock_path}: changed since the update was planned; run `annotate vendor update` again")
    lock_from_json(plan.new.to_json())  # the new lock must read back before it is written
    lock_tmp = _stage_lock(lock_path, plan.new)
    try:
        stage(plan.files, vendor, then=lambda: _commit_lock(lock_tmp, lock_path))
    finally:
        lock_tmp.unlink(missing_ok=True)


def _stage_lock(lock_path: Path, lock: Lock) -> Path:
    """The new lock in a temp file beside the old one (same folder, so the rename is atomic)."""
    return stage_file(lock_path, lock_text(lock).encode("utf-8"))


def _commit_lock(lock_tmp: Path, lock_path: Path) -> None:
    os.replace(lock_tmp, lock_path)


# --- report ---------------------------------------------------------------------------------------


def render(plan: UpdatePlan, applied: bool) -> str:
    """The human report: the two pins, files that differ, then every anchor that is not unchanged."""
    old, new = plan.old, plan.new
    lines = [f"upstream  {new.upstream.repo}",
             f"from      {old.upstream.ref}  ({', '.join(x for x in (old.upstream.committed, old.upstream.subject) if x)})",
             f"          source {old.source.describe()}",
             f"to        {new.upstream.commit}  ({new.upstream.committed}, {new.upstream.subject})",
             f"          source {new.source.describe()}", ""]
    kinds = {k: sum(c.state == k for c in plan.file_changes) for k in ("added", "removed", "changed")}
    lines.append(f"files: {kinds['added']} added, {kinds['removed']} removed, {kinds['changed']} changed, "
                 f"{len(new.upstream.files) - kinds['added'] - kinds['changed']} unchanged")
    width = max((len(c.path) for c in plan.file_changes), default=0)
    lines += [f"  {c.state:<8} {c.path:<{width}}  {c.describe()}" for c in plan.file_changes]
    counts = plan.counts()
    lines += ["", "anchors: " + ", ".join(f"{n} {s}" for s, n in counts.items())]
    if not plan.anchors:
        lines.append("  (no notes or prose references found)")
    for r in plan.anchors:
        if r.state == UNCHANGED and r.was in (EXACT, MOVED):
            continue
        lines.append(f"  {r.state:<9} {r.anchor.label}")
        lines.append(f"            {r.describe()}")
        if r.new_permalink and r.state == MOVED:
            lines.append(f"            upstream {r.new_permalink}")
        if r.anchor.origin:
            lines.append(f"            in {r.anchor.origin}")
    lines += [f"warning: {w}" for w in plan.warnings]
    lines.append("")
    lines.append(_verdict(plan, applied))
    return "\n".join(lines)


def _verdict(plan: UpdatePlan, applied: bool) -> str:
    short = plan.new.upstream.commit[:12]
    head = (f"updated {plan.upstream.dir} and {plan.upstream.lock_name} to {short}" if applied
            else "dry run: nothing was written (drop --dry-run to apply)")
    broken = len(plan.needs_fixing)
    if not broken:
        return head + "; every note and reference resolves. Next: `make site`."
    return (head + f"; {broken} anchor(s) need fixing: edit the notes/docs named above "
            "(symbol, statement), then `annotate check` until it is clean, then `make site`.")


# --- helpers --------------------------------------------------------------------------------------


class _Models:
    """Parsed source models by path, built on first use."""

    def __init__(self, files: dict[str, bytes]) -> None:
        self.files = files
        self.cache: dict[str, pysource.SourceFile | None] = {}

    def get(self, path: str) -> pysource.SourceFile | None:
        if path not in self.cache:
            data = self.files.get(path)
            self.cache[path] = None if data is None else pysource.parse(data.decode("utf-8", "replace"), path)
        return self.cache[path]


def _collect(root: Path, anchors: AnchorCollector | None) -> tuple[list[Anchor], list[str]]:
    """Every note and prose reference (``anchors`` replaces the collector, e.g. in tests)."""
    return list((anchors or all_anchors)(root)), []


def _read_vendor(vendor: Path, lock: Lock) -> dict[str, bytes] | None:
    """The old local copy's files (None when the vendor folder is not there)."""
    if not vendor.is_dir():
        return None
    names = set(lock.source.files) | set(lock.upstream.files)
    return {name: (vendor / name).read_bytes() for name in sorted(names) if (vendor / name).is_file()}


def _permalink(lock: Lock, path: str, files: dict[str, bytes], span: tuple[int, int] | None) -> str | None:
    """Upstream permalink for local ``span`` of ``path``, via the line map; None for local-only lines."""
    if span is None or path not in files or path not in lock.upstream.files:
        return None
    upstream_span = linemap.build(path, files[path], lock.upstream).upstream_span(*span)
    return lock.upstream.permalink(path, *upstream_span) if upstream_span else None


def _git_dir(path: Path) -> str | None:
    run = subprocess.run(["git", "-C", str(path), "rev-parse", "--git-dir"], capture_output=True, text=True)
    return run.stdout.strip() if run.returncode == 0 else None


def _is_local(url_or_path: str) -> bool:
    return not _URL.match(url_or_path)


def _web(url: str) -> str:
    url = url.rstrip("/")
    return url[:-4] if url.endswith(".git") else url


def _hint(anchor: Anchor) -> tuple[int, int] | None:
    return (anchor.line, anchor.line) if anchor.line is not None else None


def _span(span: tuple[int, int] | None) -> str:
    if span is None:
        return "?"
    return f"{span[0]}" if span[0] == span[1] else f"{span[0]}–{span[1]}"


def _pin_json(lock: Lock) -> dict[str, Any]:
    return {"repo": lock.upstream.repo, "commit": lock.upstream.commit, "committed": lock.upstream.committed,
            "subject": lock.upstream.subject, "source": lock.source.describe()}


__all__ = ["AnchorReport", "FileChange", "UpdatePlan", "apply_update", "file_changes", "new_lock", "plan_update",
           "plan_from_commit", "read_source", "render", "report_anchors"]
