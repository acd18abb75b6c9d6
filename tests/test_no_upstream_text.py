"""No upstream text anywhere in the repo: no git-tracked file holds three or more consecutive lines
of any vendored file (non-blank lines, compared by their tokens: all white space removed).

HTML and Markdown files are also read with their tags removed and entities decoded, one line per
row/paragraph element, so a highlighted code row (`<span>`s around each token, `<wbr>` inside, a
style on its `<code>`) counts as its tokens; the marks the page adds to a row (its line number,
a note's ✎ link) and any trailing non-ASCII decoration are left out, so the markup a renderer
wraps around upstream tokens cannot hide them. A note's one-statement `statement:` anchor is a
citation and stays possible: one line, not three.
"""
from __future__ import annotations

import html
import re
import subprocess
from pathlib import Path

from conftest import ROOT, _need_vendor

VENDOR = ROOT / "vendor"   # every upstream's materialised folder (vendor/<name>/), not only nano-vllm's
WINDOW = 3
_BLOCK_END = re.compile(r"</(?:div|p|li|tr|pre|h\d|aside|details|summary|td|th)>|<br\s*/?>", re.I)
_TAG = re.compile(r"<[^>]+>")
#: what a page adds to a source row: its number link and a note's mark link
_ROW_MARKS = re.compile(r'<a\b[^>]*class="an-(?:ln|mark)"[^>]*>.*?</a>', re.S)
_DECORATION = re.compile(r"[^\x00-\x7f]+$")   # a trailing ✎, ↗ or ¶ a renderer appends to a line
_SPACE = re.compile(r"\s+")


def normalised(text: str) -> list[str]:
    """Non-blank lines as their tokens: white space removed (markup may add or drop it between tokens),
    a trailing non-ASCII decoration dropped."""
    return [s for s in (_DECORATION.sub("", _SPACE.sub("", line)) for line in text.splitlines()) if s]


def as_text(markup: str) -> str:
    """Markup read as the text a reader sees: block ends become line breaks, tags go, entities decode."""
    return html.unescape(_TAG.sub("", _BLOCK_END.sub("\n", _ROW_MARKS.sub("", markup))))


def windows(lines: list[str]) -> set[tuple[str, ...]]:
    return {tuple(lines[i:i + WINDOW]) for i in range(len(lines) - WINDOW + 1)}


def upstream_windows() -> dict[tuple[str, ...], str]:
    """Every run of three non-blank vendored lines → the file it comes from."""
    out: dict[tuple[str, ...], str] = {}
    for path in sorted(VENDOR.glob("*/**/*")):
        if path.is_file() and path.suffix in {".py", ".md", ".txt", ".toml", ".cfg", ".yml", ".yaml"}:
            for w in windows(normalised(path.read_text(encoding="utf-8", errors="replace"))):
                out.setdefault(w, str(path.relative_to(VENDOR)))
    return out


def tracked_files() -> list[Path]:
    names = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    return [ROOT / n for n in names.decode().split("\0") if n]


def findings(path: Path, upstream: dict[tuple[str, ...], str], base: Path = ROOT) -> list[str]:
    """'<file>: lines of <vendored file> from "<first line>"' for each upstream run found in `path`."""
    try:
        text = path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, IsADirectoryError, FileNotFoundError):
        return []
    readings = [text] + ([as_text(text)] if path.suffix in {".html", ".md", ".svg", ".json"} else [])
    if path.suffix == ".json":
        readings.append(text.encode().decode("unicode_escape", errors="replace"))
    out = []
    for reading in readings:
        for w in windows(normalised(reading)) & upstream.keys():
            out.append(f"{path.relative_to(base)}: {WINDOW} lines of {upstream[w]} from {w[0]!r}")
    return sorted(set(out))


def test_no_tracked_file_holds_three_consecutive_vendored_lines() -> None:
    _need_vendor()
    upstream = upstream_windows()
    assert len(upstream) > 500                                  # the vendored package was read
    found = [f for path in tracked_files() for f in findings(path, upstream)]
    assert not found, "upstream text committed (redact it):\n" + "\n".join(found[:20])


def test_the_check_finds_upstream_lines_in_markup_and_plain_text(tmp_path: Path) -> None:
    """The detector itself: a vendored function pasted as text, and as highlighted HTML rows."""
    _need_vendor()
    upstream = upstream_windows()
    source = (VENDOR / "nano-vllm" / "nanovllm" / "layers" / "layernorm.py").read_text(encoding="utf-8")
    lines = normalised(source)
    i = next(i for i in range(len(lines)) if tuple(lines[i:i + 3]) in upstream)
    plain = tmp_path / "copied.py"
    plain.write_text("# mine\n" + "\n".join("    " + ln for ln in lines[i:i + 3]) + "\n", encoding="utf-8")
    rows = "".join(f'<div class="an-row"><code>{"".join(f"<span>{html.escape(tok)}</span>" for tok in ln.split(" "))}'
                   f"</code></div>" for ln in lines[i:i + 3])
    markup = tmp_path / "page.html"
    markup.write_text(rows.replace("</span><span>", "</span> <span>").replace("<code>", '<a class="an-ln">7</a><code>'),
                      encoding="utf-8")
    for path in (plain, markup):
        assert findings(path, upstream, tmp_path), path.name
    # a row as the page renders it: a style on <code>, tokens in spans with <wbr> and no spaces between
    # some, a note's mark link at the end of one row (tokens across markup, tests/golden's old miss)
    styled = "".join(f'<div class="an-row"><a class="an-ln" href="#L{n}">{n}</a><code class="an-code" style="--ind:4ch">'
                     + "".join(f'<span class="n">{html.escape(tok)}</span><span class="p"><wbr></span>' for tok in ln.split())
                     + (f'<a class="an-mark" href="#note-{n}">✎</a>' if n == 1 else "") + "</code></div>"
                     for n, ln in enumerate(lines[i:i + 3]))
    highlighted = tmp_path / "highlighted.md"
    highlighted.write_text(styled, encoding="utf-8")
    assert findings(highlighted, upstream, tmp_path), highlighted.name
    two = tmp_path / "two.py"
    two.write_text("\n".join(lines[i:i + 2]) + "\nsomething else entirely\n", encoding="utf-8")
    assert not findings(two, upstream, tmp_path)             # two lines (a citation) are fine



def test_the_check_reads_every_upstreams_folder() -> None:
    """HF transformers' and vLLM's materialised files are scanned too, not only nano-vllm's."""
    _need_vendor()
    sources = set(upstream_windows().values())
    assert "nano-vllm/nanovllm/models/qwen3.py" in sources
    assert "transformers/transformers/models/qwen3/modeling_qwen3.py" in sources
    assert "vllm/vllm/model_executor/models/qwen3.py" in sources
