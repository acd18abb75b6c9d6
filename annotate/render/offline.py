"""What keeps the built site whole from ``file://`` and free of dead weight, after MkDocs wrote it.

- ``404.html`` is rendered by MkDocs with root-absolute links (``/assets/…``): served from a web
  server's root they work, opened from disk they point at the file system's root and the page
  comes up unstyled. :func:`relative_root_links` makes them relative to the site's root, where
  ``404.html`` lies, which works from disk and from a server's root alike.
- Material ships a source map beside each minified script and stylesheet (about 1.3 MB in all),
  fetched only by a browser's developer tools. :func:`drop_source_maps` deletes them and the
  comments that name them (in the file each map sits beside), so nothing on the site refers to a
  missing file.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

_ROOT_LINK = re.compile(r'(\s(?:href|src)=")/(?!/)')
_CONFIG = re.compile(r'(<script id="__config" type="application/json">)(.*?)(</script>)', re.S)
_MAP_COMMENT = re.compile(r"\n?(?://# sourceMappingURL=[^\n]*\.map[ \t]*|/\*# sourceMappingURL=[^*]*\.map ?\*/)\s*$")


def relative_root_links(page_html: str) -> str:
    """``href="/x"`` / ``src="/x"`` → ``href="./x"`` (protocol-relative ``//host`` links are kept), and
    the same for the paths in Material's page config (its scripts load the search worker and index
    from there: ``"base": "/"`` → ``"."``)."""
    return _CONFIG.sub(_relative_config, _ROOT_LINK.sub(r"\1./", page_html))


def _relative(value: Any) -> Any:
    if isinstance(value, str) and value.startswith("/") and not value.startswith("//"):
        return "." + value.rstrip("/") if value.rstrip("/") else "."
    if isinstance(value, dict):
        return {k: _relative(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_relative(v) for v in value]
    return value


def _relative_config(m: re.Match[str]) -> str:
    try:
        config = json.loads(m.group(2))
    except json.JSONDecodeError:
        return m.group(0)
    return m.group(1) + json.dumps(_relative(config), ensure_ascii=False) + m.group(3)


def drop_source_maps(site_dir: Path) -> int:
    """Delete every ``X.map`` under `site_dir` and the comment naming it at the end of ``X`` beside it;
    returns the bytes removed. Only those files are read: the site's other scripts (the values
    scripts, megabytes that grow with the trace's depth) are left unread on every rebuild."""
    removed = 0
    for path in sorted(site_dir.rglob("*.map")):
        removed += path.stat().st_size
        path.unlink()
        _drop_map_comment(path.with_suffix(""))
    return removed


def _drop_map_comment(path: Path) -> None:
    """Strip the trailing ``sourceMappingURL`` comment of the script or stylesheet `path`, if it is one."""
    if path.suffix not in (".js", ".css") or not path.is_file():
        return
    text = path.read_text(encoding="utf-8", errors="surrogateescape")
    trimmed = _MAP_COMMENT.sub("", text)
    if trimmed != text:
        path.write_text(trimmed, encoding="utf-8", errors="surrogateescape")
