"""annotate.render.offline: 404.html works from disk, and the built site carries no source maps."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from annotate.render.offline import drop_source_maps, relative_root_links

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
