"""The MkDocs plugin end to end: a real `mkdocs build --strict`, and every bad input failing cleanly."""
from __future__ import annotations

import re
import subprocess
import sys
from unittest import mock
from pathlib import Path

import pytest

from annotate.cli import main
from annotate.guard import OUTPUT_MARKER
from annotate.lesson import cache
from annotate.plugin import AnnotatePlugin
from annotate.project import Project

pytest_plugins = ["site_fixtures"]

LAYERNORM = "nanovllm/layers/layernorm.py"
NOTES = f"notes/{LAYERNORM}.yml"


def test_real_mkdocs_build_strict(project: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    run = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-f", str(project / "mkdocs.yml"),
                          "-d", str(out)], capture_output=True, text=True, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    for path in (LAYERNORM, "nanovllm/layers/activation.py", "nanovllm/models/qwen3.py"):
        assert (out / f"source/{path}.html").is_file()
    assert (out / "source/index.html").is_file()
    assert (out / "assets/katex/katex.min.css").is_file()
    assert list((out / "assets/katex/fonts").glob("KaTeX_Main-Regular.woff2"))


def test_built_pages_load_nothing_from_the_network(built_site: Path) -> None:
    for page in [built_site / "index.html", *built_site.glob("source/**/*.html")]:
        text = page.read_text(encoding="utf-8")
        for url in re.findall(r'<(?:link|script|img)[^>]+(?:href|src)="([^"]+)"', text):
            assert not re.match(r"(https?:)?//", url), f"{page}: loads {url}"
    css = (built_site / "assets/katex/katex.min.css").read_text()
    assert "url(fonts/KaTeX_Main-Regular.woff2)" in css and "http" not in css


def test_math_is_rendered_at_build_time(built_site: Path) -> None:
    text = (built_site / f"source/{LAYERNORM}.html").read_text(encoding="utf-8")
    assert text.count('class="katex"') > 20 and 'class="katex-display"' in text
    index = (built_site / "index.html").read_text(encoding="utf-8")
    assert 'class="arithmatex"' not in index and 'class="katex-display"' in index


def test_prose_references_become_links(built_site: Path) -> None:
    index = (built_site / "index.html").read_text(encoding="utf-8")
    assert f'href="source/{LAYERNORM}.html#L36"><code>layernorm.py:36</code></a>' in index
    assert f'/blob/2f214426530e2841e7d24c73ee0dfa914d62df56/{LAYERNORM}#L36"' in index
    assert "[[" not in re.sub(r"<code>.*?</code>|<pre.*?</pre>", "", index, flags=re.S)


def build(project: Path, *extra: str) -> int:
    return main(["--root", str(project), "build", "--site-dir", str(project / "site"), *extra])


def keep_old_site(project: Path) -> Path:
    marker = project / "site" / "old.txt"
    marker.parent.mkdir()
    marker.write_text("previous build")
    (marker.parent / OUTPUT_MARKER).write_text("a previous annotate build")  # else the output guard refuses it
    return marker


def one_error_line(capsys) -> str:
    """The error as printed: one `annotate: error:` line (then one more line per further problem)."""
    err = capsys.readouterr().err.splitlines()
    starts = [i for i, line in enumerate(err) if line.startswith("annotate: error:")]
    assert len(starts) == 1, err
    return err[starts[0]]


def test_build_swaps_in_a_complete_site(project: Path) -> None:
    marker = keep_old_site(project)
    from annotate.pages.lesson import lesson_formulas

    with mock.patch.object(cache, "cache_key", wraps=cache.cache_key) as keyed, \
            mock.patch.object(lesson_formulas, "expand", wraps=lesson_formulas.expand) as expanded:
        assert build(project) == 0
    # the lesson's claims are looked up once per build (Snapshot.claims), not hashed afresh by every page
    assert keyed.call_count == 1
    # every page's placeholders expanded once, none twice
    uris = [c.args[1] for c in expanded.call_args_list]
    assert len(uris) == len(set(uris)) and "lesson.md" in uris and "source/nanovllm/models/qwen3.py.md" in uris
    assert not marker.exists() and (project / "site/index.html").is_file()
    assert not [p for p in project.iterdir() if p.name.startswith(".site.")]


@pytest.mark.parametrize("edit, expected", [
    (lambda t: t.replace("residual = x.to(orig_dtype)", "residual = x.half()"),
     rf"{NOTES}: note 14: {LAYERNORM} › RMSNorm.add_rms_forward › residual = x.half\(\): changed"),
    (lambda t: t.replace("symbol: RMSNorm.forward\n", "symbol: RMSNorm.fwd\n", 1),
     rf"{NOTES}: note \d+: {LAYERNORM} › RMSNorm.fwd: vanished"),
    (lambda t: t.replace("notes:\n", "notes:\n  - symbol: [\n", 1), rf"{NOTES}:\d+:\d+: malformed YAML"),
    (lambda t: t.replace("\\varepsilon = 10^{-6}", "\\frac{1"), rf"{NOTES}:\d+: note 2 `math`: KaTeX parse error"),
    (lambda t: t + "  - symbol: RMSNorm\n    zh: again\n", r"duplicates note 1"),
])
def test_bad_notes_fail_the_build_with_one_line_and_keep_the_old_site(project: Path, capsys, edit, expected) -> None:
    notes = project / NOTES
    notes.write_text(edit(notes.read_text(encoding="utf-8")), encoding="utf-8")
    marker = keep_old_site(project)
    assert build(project) == 2
    assert re.search(expected, one_error_line(capsys))
    assert marker.read_text() == "previous build"
    assert not [p for p in project.iterdir() if p.name.startswith(".site.")]


def test_notes_for_a_path_not_in_the_vendor_fail_the_build(project: Path, capsys) -> None:
    (project / "notes/nanovllm/layers/gone.py.yml").write_text("notes: []\n")
    assert build(project) == 2
    assert "notes/nanovllm/layers/gone.py.yml: nanovllm/layers/gone.py is not a vendored file" in one_error_line(capsys)


def test_unresolved_reference_fails_strict_naming_page_and_reference(project: Path, capsys) -> None:
    (project / "docs/lesson.md").write_text("# L\n\nsee [[layernorm.py › RMSNorm.forward › return 42]]\n")
    assert build(project) == 2
    err = capsys.readouterr().err
    assert "docs/lesson.md:3: reference [[layernorm.py › RMSNorm.forward › return 42]] does not resolve" in err


def test_without_strict_bad_anchors_only_warn(project: Path, capsys) -> None:
    notes = project / NOTES
    notes.write_text(notes.read_text().replace("residual = x.to(orig_dtype)", "residual = x.half()"))
    (project / "docs/lesson.md").write_text("# L\n\nsee [[layernorm.py › RMSNorm.forward › return 42]]\n")
    assert build(project, "--no-strict") == 0
    err = capsys.readouterr().err
    assert "note 14" in err and "docs/lesson.md:3" in err
    page = (project / f"site/source/{LAYERNORM}.html").read_text()
    assert 'id="note-14"' not in page and 'id="note-15"' in page
    assert 'class="an-ref-broken"' in (project / "site/lesson.html").read_text()


def test_missing_katex_is_one_line_with_the_fix(project: Path, capsys) -> None:
    (project / "node_modules").unlink()
    assert build(project) == 2
    assert "KaTeX is not installed; run `npm ci`" in one_error_line(capsys)


class FakeServer:
    def __init__(self) -> None:
        self.watched: list[str] = []
        self.app = None

    def watch(self, path: str) -> None:
        self.watched.append(path)

    def get_app(self):
        return self.app

    def set_app(self, app) -> None:
        self.app = app


def test_serve_watches_vendor_notes_traces_map_and_experiments(project: Path) -> None:
    (project / "traces").mkdir()
    (project / "experiments").mkdir()
    plugin = AnnotatePlugin()
    plugin.root, plugin.project = project, Project.load(project)
    server = FakeServer()
    plugin.on_serve(server, None, None)
    assert [Path(p).name for p in server.watched] == [f.name for f in plugin.project.watched] == [
        "vendor", "notes", "traces", "map", "experiments"]


def test_serve_answers_a_nul_byte_in_the_path_with_400_not_a_traceback(project: Path, tmp_path: Path, caplog) -> None:
    """`%00` reached MkDocs' `open()`: ValueError, a 500 and a traceback in the log. The real dev server,
    its app called as a WSGI request would call it (nothing is bound)."""
    import io
    import logging

    from mkdocs.livereload import LiveReloadServer

    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "index.html").write_text("<html><body>hi</body></html>", encoding="utf-8")
    server = LiveReloadServer(builder=lambda: None, host="127.0.0.1", port=0, root=str(tmp_path / "site"))
    plugin = AnnotatePlugin()
    plugin.root, plugin.project = project, Project.load(project)
    assert plugin.on_serve(server, None, None) is server
    got: list[str] = []

    def request(path: str) -> bytes:
        environ = {"PATH_INFO": path, "REQUEST_METHOD": "GET", "wsgi.input": io.BytesIO()}
        return b"".join(server.get_app()(environ, lambda status, headers: got.append(status)))

    with caplog.at_level(logging.DEBUG):
        body = request("/a\0b.html")
    assert got == ["400 Bad Request"] and b"NUL" in body
    assert not [r for r in caplog.records if r.exc_info] and "Traceback" not in caplog.text
    assert request("/index.html").startswith(b"<html><body>hi") and got[-1] == "200 OK"   # (livereload script added)
    server.server_close()
