"""Third-party files the built site serves, copied at build time from the npm install (never committed).

- KaTeX's CSS and woff2 fonts: the math is rendered at build time, pages only need these.
- iframe-worker's shim: Material's search runs in a web worker, which browsers refuse on
  ``file://``; Material's offline plugin loads this shim from a CDN unless ``extra.polyfills``
  already names a local copy, which mkdocs.yml does (``assets/iframe-worker/shim.js``).
"""
from __future__ import annotations

from pathlib import Path

from annotate.errors import UserError
from annotate.render.katex import INSTALL_HINT, asset_files as katex_files

SHIM_URI = "assets/iframe-worker/shim.js"


def site_assets(root: Path) -> dict[str, Path]:
    """Site path -> installed file, for every third-party asset the pages load."""
    files = katex_files(root)
    shim = root / "node_modules" / "iframe-worker" / "shim" / "index.js"
    if not shim.is_file():
        raise UserError(f"{shim}: iframe-worker is not installed; {INSTALL_HINT}")
    files[SHIM_URI] = shim
    return files
