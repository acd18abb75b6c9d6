"""annotate.render.offline: 404.html works from disk, the built site carries no source maps, and the search
index is one copy loaded on the first use of search (from disk and over http)."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from annotate.render.offline import SEARCH_SCRIPT_PREFIX, drop_source_maps, lazy_search, read_search_index, relative_root_links

from browser_helpers import SETTLE_MS, first_open, serving

pytest_plugins = ["site_fixtures", "browser_fixtures"]


def test_root_links_become_relative_and_other_links_stay() -> None:
    page = ('<link href="/assets/a.css"><script src="/assets/b.js"></script><a href="//cdn.example/x">'
            '<a href="https://example.org/y"><a href="lesson.html"><a title="/not-a-link">'
            '<script id="__config" type="application/json">{"base": "/", "search": "/w/s.js", "cdn": "//h/x", "n": 1}</script>')
    out = relative_root_links(page)
    assert 'href="./assets/a.css"' in out and 'src="./assets/b.js"' in out
    assert 'href="//cdn.example/x"' in out and 'href="https://example.org/y"' in out and 'href="lesson.html"' in out
    assert 'title="/not-a-link"' in out
    assert '{"base": ".", "search": "./w/s.js", "cdn": "//h/x", "n": 1}' in out


def test_source_maps_and_the_comments_naming_them_go(tmp_path: Path) -> None:
    (tmp_path / "js").mkdir()
    (tmp_path / "js" / "a.min.js").write_text("var a=1;\n//# sourceMappingURL=a.min.js.map", encoding="utf-8")
    (tmp_path / "js" / "a.min.js.map").write_text("{}" * 50, encoding="utf-8")
    (tmp_path / "s.css").write_text("a{b:c}\n/*# sourceMappingURL=s.css.map */", encoding="utf-8")
    (tmp_path / "s.css.map").write_text("{}", encoding="utf-8")
    (tmp_path / "keep.js").write_text("// a comment about sourceMappingURL in prose\nvar k;", encoding="utf-8")
    assert drop_source_maps(tmp_path) == 102
    assert not list(tmp_path.rglob("*.map"))
    assert (tmp_path / "js" / "a.min.js").read_text(encoding="utf-8") == "var a=1;"
    assert (tmp_path / "s.css").read_text(encoding="utf-8") == "a{b:c}"
    assert "sourceMappingURL" in (tmp_path / "keep.js").read_text(encoding="utf-8")


def test_only_the_files_beside_a_map_are_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "a.min.js").write_text("var a=1;\n//# sourceMappingURL=a.min.js.map", encoding="utf-8")
    (tmp_path / "a.min.js.map").write_text("{}", encoding="utf-8")
    values = tmp_path / "qwen3.py.values-cpu.js"   # a values script: no map beside it
    values.write_text("var v=1;", encoding="utf-8")
    before = values.stat().st_mtime_ns
    read: list[Path] = []
    real = Path.read_text

    def spy(self: Path, *args: Any, **kwargs: Any) -> str:
        read.append(self)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", spy)
    assert drop_source_maps(tmp_path) == 2
    assert read == [tmp_path / "a.min.js"] and values.stat().st_mtime_ns == before
    assert real(tmp_path / "a.min.js", encoding="utf-8") == "var a=1;"


def test_built_site_has_no_source_maps_and_a_relative_404(built_site: Path) -> None:
    assert not list(built_site.rglob("*.map"))
    named = [p for p in built_site.rglob("*.js") if re.search(r"sourceMappingURL=\S+\.map", p.read_text(errors="replace"))]
    assert not named, named
    page = (built_site / "404.html").read_text(encoding="utf-8")
    assert not re.search(r'\s(?:href|src)="/(?!/)', page) and '"base": "/"' not in page


@pytest.mark.browser
def test_404_is_styled_when_opened_from_disk(browser, built_site: Path) -> None:
    page = browser.new_page()
    failed: list[str] = []
    page.on("requestfailed", lambda request: failed.append(request.url))
    page.goto((built_site / "404.html").as_uri())
    page.wait_for_load_state("load")
    assert not failed, failed
    # Material's stylesheet applied: the header bar is laid out, not an unstyled list
    assert page.eval_on_selector(".md-header", "el => getComputedStyle(el).position") in ("sticky", "fixed")
    page.close()


#: A stand-in bundle written here (not Material's code, names made up): only the two shapes
#: offline.lazy_search looks for in Material's — the index's source chosen by protocol, and the index
#: asked for as the bundle starts unless on file://
_BUNDLE = ('function pickIndex(){return location.protocol==="file:"?viaScript(`${new URL("search/search_index.js",base)}`)'
           ':viaJson(new URL("search/search_index.json",base))}'
           'function startSearch(el){return either(when(location.protocol!=="file:"),onToggle("search")).then(go)}')


def _search_site(root: Path, bundle: str) -> Path:
    (root / "assets" / "javascripts").mkdir(parents=True)
    (root / "assets" / "javascripts" / "bundle.0123abcd.min.js").write_text(bundle, encoding="utf-8")
    (root / "search").mkdir()
    (root / "search" / "search_index.json").write_text('{"docs": [1]}', encoding="utf-8")
    (root / "search" / "search_index.js").write_text(SEARCH_SCRIPT_PREFIX + '{"docs": [1]}', encoding="utf-8")
    return root


def test_lazy_search_loads_the_script_on_any_protocol_and_drops_the_json(tmp_path: Path) -> None:
    site = _search_site(tmp_path, _BUNDLE)
    done = lazy_search(site)
    assert done.unchanged == "" and done.removed == len('{"docs": [1]}')
    text = done.bundle.read_text(encoding="utf-8") if done.bundle else ""
    assert 'function pickIndex(){return !0?viaScript(`${new URL("search/search_index.js"' in text   # the script, on any protocol
    assert text == _BUNDLE.replace('return location.protocol==="file:"?', "return !0?").replace(
        'either(when(location.protocol!=="file:"),onToggle("search"))', 'onToggle("search")')  # the script, never at start
    assert not (site / "search" / "search_index.json").exists()
    assert read_search_index(site) == {"docs": [1]}


def test_an_unknown_bundle_is_left_as_it_was(tmp_path: Path) -> None:
    other = _BUNDLE.replace('search/search_index.js', 'search/index.js')   # another Material
    site = _search_site(tmp_path, other)
    done = lazy_search(site)
    assert done.bundle is None and "not recognised" in done.unchanged
    assert (site / "assets" / "javascripts" / "bundle.0123abcd.min.js").read_text(encoding="utf-8") == other
    assert (site / "search" / "search_index.json").is_file()
    assert read_search_index(site) == {"docs": [1]}


QWEN3_PAGE = "source/nanovllm/models/qwen3.py.html"
FIRST_OPEN_LIMIT = 900_000   # bytes, issue 24


@pytest.mark.browser
def test_qwen3_first_open_is_light_and_search_loads_on_first_use(browser, built_site: Path) -> None:
    assert not (built_site / "search" / "search_index.json").exists()           # one copy
    index_bytes = (built_site / "search" / "search_index.js").stat().st_size
    with serving(built_site) as base:
        for url in ((built_site / QWEN3_PAGE).as_uri(), base + QWEN3_PAGE):
            loaded = first_open(browser, url)
            total = sum(r.size for r in loaded)
            print(f"{url.split(':')[0]}: {len(loaded)} responses, {total} bytes; index {index_bytes} bytes")
            assert not [r.url for r in loaded if "search_index" in r.url]
            assert any(r.url.endswith(QWEN3_PAGE) and r.size > 100_000 for r in loaded)   # the page itself counted
            assert total < FIRST_OPEN_LIMIT, sorted(loaded, key=lambda r: -r.size)[:8]


@pytest.mark.browser
@pytest.mark.parametrize("how", ["focus", "click", "key"])
def test_search_works_from_disk_after_the_lazy_load(browser, built_site: Path, how: str) -> None:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.goto((built_site / QWEN3_PAGE).as_uri(), timeout=120_000)
    page.wait_for_load_state("load", timeout=120_000)
    page.wait_for_timeout(SETTLE_MS)
    assert not [u for u in requests if "search_index" in u]
    if how == "focus":
        page.focus("input.md-search__input")
    elif how == "click":
        page.click("label.md-search__icon, .md-search__input", timeout=5000)
    else:
        page.keyboard.press("/")
    page.keyboard.type("residual")
    page.wait_for_selector(".md-search-result__item", timeout=30_000)
    assert len([u for u in requests if u.endswith("search/search_index.js")]) == 1
    assert page.locator(".md-search-result__item").count() > 0
    context.close()
