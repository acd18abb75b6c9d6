"""All claims of one project root: computed ones (cached) plus facts from the vendor lock."""
from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path

from annotate.lesson import cache
from annotate.lesson.model import Claim


@dataclass
class Table:
    """Claims by name; ``failed`` maps a family prefix to why the whole family could not be computed."""

    key: str
    claims: dict[str, Claim] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)

    def failure(self, name: str) -> str | None:
        """Why the family owning ``name`` failed, if it did."""
        prefix = name.split(".", 1)[0]
        return self.failed.get(prefix)

    def suggest(self, name: str) -> list[str]:
        """Up to three known names close to ``name``."""
        return difflib.get_close_matches(name, list(self.claims), n=3, cutoff=0.6)


_MEMO: dict[tuple[str, str], Table] = {}


def vendor_claims(root: Path) -> list[Claim]:
    """``vendor.*``: the pinned upstream commit and where the local copy comes from."""
    from annotate.vendoring import LOCK_NAME, read_lock

    lock = read_lock(root / LOCK_NAME)
    up = lock.upstream
    return [Claim("vendor.commit", up.commit, "pinned upstream commit (full)"),
            Claim("vendor.commit_short", up.commit[:12], "pinned upstream commit (12 digits)"),
            Claim("vendor.committed", up.committed[:10], "date of the pinned commit"),
            Claim("vendor.repo", up.repo, "upstream repository"),
            Claim("vendor.source", lock.source.describe(), "where the local copy comes from")]


def computed(root: Path) -> Table:
    """The computed claims for ``root`` (memoised per cache key, so a vendor edit is picked up at once)."""
    key, data = cache.load_claims(root)
    memo = (str(root), key)
    if memo not in _MEMO:
        table = Table(key, failed=dict(data.get("failed", {})))
        for name, raw in data.get("claims", {}).items():
            table.claims[name] = Claim.from_json(name, raw)
        table.claims["claims.torch"] = Claim("claims.torch", data.get("torch", "?"), "torch version that computed them")
        _MEMO[memo] = table
    return _MEMO[memo]


def load_table(root: Path) -> Table:
    """Computed claims plus the lock's ``vendor.*`` facts (read afresh: the lock may change alone)."""
    root = root.resolve()
    base = computed(root)
    table = Table(base.key, dict(base.claims), dict(base.failed))
    table.claims.update({c.name: c for c in vendor_claims(root)})
    return table
