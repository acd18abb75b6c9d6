"""Golden files: one comparison and one switch to rewrite them, with vendored code always left out.

``UPDATE_GOLDEN=1 pytest …`` rewrites every golden the run compares (review the diff, commit it).
A golden is generated text of this project; the vendored code it would quote is replaced before
the comparison, so no golden holds upstream code (tests/test_no_upstream_text.py checks the tree):
a source row's highlighted code becomes a fingerprint of its markup (a change of highlighting or
text still fails), a highlighted block a marker, and any other vendored line a marker.
"""
from __future__ import annotations

import functools
import hashlib
import html
import os
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GOLDEN = REPO / "tests" / "golden"
VENDOR = REPO / "vendor" / "nano-vllm"
UPDATE = "UPDATE_GOLDEN"

_CODE_ROW = re.compile(r'(<code class="an-code"[^>]*>)(.*?)(</code>)', re.S)   # with or without a style
_BLOCK = re.compile(r'<div class="highlight"><pre><code>.*?</code></pre></div>', re.S)


@functools.lru_cache(maxsize=1)
def _vendored_lines() -> tuple[str, ...]:
    """Every vendored line of 12 characters or more (white space normalised), longest first."""
    codes = {" ".join(line.split()) for path in VENDOR.rglob("*.py")
             for line in path.read_text(encoding="utf-8").splitlines()}
    return tuple(sorted((c for c in codes if len(c) >= 12), key=len, reverse=True))


def redact(text: str) -> str:
    """`text` with vendored code left out (see the module docstring)."""
    text = _CODE_ROW.sub(lambda m: f"{m[1]}‹vendored line {hashlib.sha256(m[2].encode()).hexdigest()[:12]}›{m[3]}", text)
    text = _BLOCK.sub('<div class="highlight">‹vendored or generated code›</div>', text)
    for code in _vendored_lines():
        text = text.replace(code, "‹vendored line›").replace(html.escape(code, quote=False), "‹vendored line›")
    return text


def compare_golden(name: str | Path, text: str, *, redacted: bool = True) -> None:
    """Compare `text` with the golden `name` (under tests/golden/, or a path of the repo such as a
    generated docs page, which is compared as it is: `redacted=False`)."""
    golden = name if isinstance(name, Path) else GOLDEN / name
    text = redact(text) if redacted else text
    if os.environ.get(UPDATE):
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text, encoding="utf-8")
    assert golden.is_file(), f"{golden} missing: run {UPDATE}=1 pytest and review the new file"
    assert text == golden.read_text(encoding="utf-8"), f"{golden} differs: run {UPDATE}=1 pytest and review the diff"
