"""Server-side math: LaTeX -> KaTeX HTML at build time, through one long-lived node process.

The site must render math without a CDN, without network fonts and from ``file://``, so every
formula is turned into KaTeX's HTML (plus MathML) while the site is built; pages then need only
KaTeX's CSS and fonts, which :func:`asset_files` copies from the installed npm package. KaTeX is
installed by the project's set-up (``npm ci`` reads package.json / package-lock.json); it is
never committed.
"""
from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from annotate.errors import UserError

WORKER = Path(__file__).with_name("katex_worker.js")
INSTALL_HINT = "run `npm ci` in the project root (part of `make install`)"


class MathError(ValueError):
    """KaTeX could not parse a formula; the message is KaTeX's own."""


QQUAD = "\\qquad"
OPENERS = ("{", "\\left", "\\begin")
CLOSERS = ("}", "\\right", "\\end")


def display_parts(tex: str) -> list[str]:
    """A display formula cut at its top-level ``\\qquad`` (outside braces, ``\\left…\\right`` and
    environments): the statements a formula sets side by side (``RMSNorm(x) = …, \\qquad γ ∈ ℝᴴ``).

    Each part is rendered as its own display formula in one wrapping row, so a phone stacks them instead
    of hiding the second one off-screen; a formula without such a gap is one part.
    """
    parts, depth, start, i = [], 0, 0, 0
    while i < len(tex):
        if tex[i] == "\\" and i + 1 < len(tex) and not tex[i + 1].isalpha():
            i += 2                                        # an escaped character: \{ \} \\ \,
            continue
        opener = next((t for t in OPENERS if _token_at(tex, i, t)), None)
        closer = next((t for t in CLOSERS if _token_at(tex, i, t)), None)
        if opener or closer:
            depth += 1 if opener else -1
            i += len(opener or closer or "")
        elif depth == 0 and _token_at(tex, i, QQUAD):
            parts.append(tex[start:i])
            i += len(QQUAD)
            start = i
        else:
            i += 1
    parts.append(tex[start:])
    parts = [p.strip() for p in parts]
    return parts if len(parts) > 1 and all(parts) else [tex]


def _token_at(tex: str, i: int, token: str) -> bool:
    """Whether ``token`` starts at ``i`` as a whole: a command is not the start of a longer one (``\\leftarrow``)."""
    return tex.startswith(token, i) and not (token[0] == "\\" and tex[i + len(token):i + len(token) + 1].isalpha())


def join_parts(html: list[str]) -> str:
    """The rendered parts of one display formula in one row that wraps (annotate.css `.an-math-parts`)."""
    return html[0] if len(html) == 1 else f'<span class="an-math-parts">{"".join(html)}</span>'


def katex_dir(root: Path) -> Path:
    """Folder of the installed KaTeX package (``$ANNOTATE_KATEX_DIR`` overrides ``node_modules/katex``)."""
    override = os.environ.get("ANNOTATE_KATEX_DIR")
    folder = Path(override) if override else root / "node_modules" / "katex"
    if not (folder / "katex.js").is_file() or not (folder / "dist" / "katex.min.css").is_file():
        raise UserError(f"{folder}: KaTeX is not installed; {INSTALL_HINT}")
    return folder


@dataclass
class Katex:
    """A KaTeX renderer backed by one node process; results are cached per (tex, display)."""

    root: Path
    cache: dict[tuple[str, bool], str] = field(default_factory=dict)
    errors: dict[tuple[str, bool], str] = field(default_factory=dict)
    _proc: subprocess.Popen | None = field(default=None, repr=False)

    def render(self, tex: str, display: bool = False) -> str:
        """KaTeX HTML for ``tex``; raises :class:`MathError` with KaTeX's message if it cannot parse."""
        self.prefetch([(tex, display)])
        key = (tex, display)
        if key in self.errors:
            raise MathError(self.errors[key])
        return self.cache[key]

    def prefetch(self, formulas: list[tuple[str, bool]]) -> None:
        """Render many formulas in one round trip (errors are kept and raised by :meth:`render`).

        A display formula with top-level ``\\qquad`` gaps is rendered part by part (:func:`display_parts`)
        and kept whole when a part does not parse on its own."""
        todo = [k for k in dict.fromkeys(formulas) if k not in self.cache and k not in self.errors]
        if not todo:
            return
        asks = {k: display_parts(k[0]) if k[1] else [k[0]] for k in todo}
        requests = list(dict.fromkeys((part, key[1]) for key, parts in asks.items() for part in parts))
        answers = dict(zip(requests, self._ask([{"tex": tex, "display": display} for tex, display in requests])))
        for key, parts in asks.items():
            got = [answers[(part, key[1])] for part in parts]
            if len(parts) > 1 and any("error" in a for a in got):
                got = [self._ask({"tex": key[0], "display": key[1]})]   # the whole formula: KaTeX's own message
            self._store(key, {"error": next(a["error"] for a in got if "error" in a)} if any("error" in a for a in got)
                        else {"html": join_parts([a["html"] for a in got])})

    def _store(self, key: tuple[str, bool], answer: dict) -> None:
        if "error" in answer:
            self.errors[key] = answer["error"]
        else:
            self.cache[key] = answer["html"]

    def check(self, tex: str) -> str | None:
        """KaTeX's message if ``tex`` does not parse, else None."""
        try:
            self.render(tex, display=True)
        except MathError as exc:
            return str(exc)
        return None

    def _ask(self, request: dict | list) -> Any:
        proc = self._process()
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps(request) + "\n")
        proc.stdin.flush()
        line = proc.stdout.readline()
        if not line:
            self.close()
            raise UserError(f"the KaTeX worker ({WORKER.name}) stopped; check `node --version` (>= 18) and {INSTALL_HINT}")
        return json.loads(line)

    def _process(self) -> subprocess.Popen:
        if self._proc is None or self._proc.poll() is not None:
            node = shutil.which("node")
            if node is None:
                raise UserError(f"node is not on PATH: KaTeX renders the math at build time; install Node.js, then {INSTALL_HINT}")
            self._proc = subprocess.Popen(
                [node, str(WORKER), str((katex_dir(self.root) / "dist").resolve())],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                text=True, encoding="utf-8", bufsize=1,
            )
            atexit.register(self.close)
        return self._proc

    def close(self) -> None:
        """Stop the node process (it also stops by itself when stdin closes)."""
        if self._proc is not None:
            if self._proc.stdin:
                self._proc.stdin.close()
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
            self._proc = None


_SHARED: dict[Path, Katex] = {}


def shared(root: Path) -> Katex:
    """One renderer per project root for the whole process, so `mkdocs serve` rebuilds reuse it."""
    key = root.resolve()
    if key not in _SHARED:
        _SHARED[key] = Katex(key)
    return _SHARED[key]


def asset_files(root: Path) -> dict[str, Path]:
    """Site path -> installed file for KaTeX's CSS and its woff2 fonts (what the pages load)."""
    dist = katex_dir(root) / "dist"
    files = {"assets/katex/katex.min.css": dist / "katex.min.css"}
    for font in sorted((dist / "fonts").glob("*.woff2")):
        files[f"assets/katex/fonts/{font.name}"] = font
    return files
