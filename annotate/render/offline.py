"""What keeps the built site whole from ``file://`` and free of dead weight, after MkDocs wrote it.

- ``404.html`` is rendered by MkDocs with root-absolute links (``/assets/…``): served from a web
  server's root they work, opened from disk they point at the file system's root and the page
  comes up unstyled. :func:`relative_root_links` makes them relative to the site's root, where
  ``404.html`` lies, which works from disk and from a server's root alike.
- Material ships a source map beside each minified script and stylesheet (about 1.3 MB in all),
  fetched only by a browser's developer tools. :func:`drop_source_maps` deletes them and the
  comments that name them (in the file each map sits beside), so nothing on the site refers to a
  missing file.
- Material loads the search index (over a megabyte) on every page as it opens, before anyone
  searches, and ships it twice (``search_index.json`` over http, the offline plugin's
  ``search_index.js`` from ``file://``). :func:`lazy_search` makes Material's bundle load the script
  on both, never as the bundle starts, and deletes the JSON copy; ``docs/assets/annotate.js`` holds
  that script back until the reader first uses search (focus, click or keyboard shortcut of the
  search box).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_ROOT_LINK = re.compile(r'(\s(?:href|src)=")/(?!/)')
_CONFIG = re.compile(r'(<script id="__config" type="application/json">)(.*?)(</script>)', re.S)
#: Material's bundle: over http the index is asked for as the bundle starts (before annotate.js can hold it
#: back), from file:// on the search toggle; made the latter on both
_EAGER_INDEX = re.compile(r'[\w$]+\([\w$]+\(location\.protocol!=="file:"\),([\w$]+\("search"\))\)')
#: Material's bundle: the index from the offline plugin's script on file://, else from the JSON
_INDEX_SOURCE = re.compile(r'location\.protocol==="file:"\?(?=[\w$]+\(`\$\{new URL\("search/search_index\.js")')
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


#: the offline plugin's script: this, then the index's JSON
SEARCH_SCRIPT_PREFIX = "var __index = "


@dataclass(frozen=True)
class LazySearch:
    """What :func:`lazy_search` did: the bundle it changed and the bytes of the JSON copy it deleted, or
    why it changed nothing (``unchanged``: empty when it did its work)."""

    bundle: Path | None
    removed: int
    unchanged: str = ""


def lazy_search(site_dir: Path) -> LazySearch:
    """Make Material's bundle load the search index from the offline plugin's ``search/search_index.js``
    on http and ``file://`` alike, and over http too not as the bundle starts (then annotate.js, which
    runs after the bundle, can hold the script back until search is first used); then delete
    ``search_index.json``.

    Both edits must each match once in exactly one bundle; otherwise nothing is changed (another Material
    version: search still works, loaded as Material does) and ``unchanged`` says why."""
    script = site_dir / "search" / "search_index.js"
    if not script.is_file():
        return LazySearch(None, 0, "no search/search_index.js (search or offline plugin off)")
    bundles = sorted((site_dir / "assets" / "javascripts").glob("bundle.*.min.js"))
    if len(bundles) != 1:
        return LazySearch(None, 0, f"{len(bundles)} Material bundles under assets/javascripts, expected 1")
    text = bundles[0].read_text(encoding="utf-8")
    if len(_EAGER_INDEX.findall(text)) != 1 or len(_INDEX_SOURCE.findall(text)) != 1:
        return LazySearch(None, 0, f"{bundles[0].name}: Material's search-index loader not recognised "
                                   "(annotate/render/offline.py knows mkdocs-material 9.8); the index loads on every page")
    bundles[0].write_text(_INDEX_SOURCE.sub("!0?", _EAGER_INDEX.sub(r"\1", text)), encoding="utf-8")
    json_copy = script.with_suffix(".json")
    removed = json_copy.stat().st_size if json_copy.is_file() else 0
    json_copy.unlink(missing_ok=True)
    return LazySearch(bundles[0], removed)


def read_search_index(site_dir: Path) -> dict[str, Any]:
    """The built site's search index (``{"config": …, "docs": [...]}``), from the one copy it ships:
    the offline plugin's script, else (Material's bundle left as it was) the JSON."""
    script = site_dir / "search" / "search_index.js"
    if script.is_file():
        text = script.read_text(encoding="utf-8")
        if text.startswith(SEARCH_SCRIPT_PREFIX):
            return json.loads(text[len(SEARCH_SCRIPT_PREFIX):])
    return json.loads(script.with_suffix(".json").read_text(encoding="utf-8"))
