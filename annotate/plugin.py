"""MkDocs plugin ``annotate``: thin glue between MkDocs' hooks and the rooms that do the work.

One frozen :class:`annotate.pages.base.snapshot.Snapshot` (the build's facts: vendored files, notes,
references, traces, the map, the lesson's claims) is made in ``on_files`` and is the only state kept
between hooks; ``on_config`` reads the configuration once (the project layout, :class:`annotate.project.Project`,
from MkDocs' own config; strict; the KaTeX renderer).
Policy lives in the rooms: the traces' (:func:`annotate.pages.base.trace_set.review_traces`), broken
references' (:func:`annotate.references.broken`), the page math (:func:`annotate.docs_math.render_page_math`).
Hooks:

- ``on_files``: build the snapshot (in strict mode the vendored copies are verified against the
  locks first), then generate ``source/**`` pages (with the values panels of the traces under
  ``traces/``), the three-framework map, the ``trace/**`` pages and KaTeX's CSS/fonts; in strict
  mode any unresolved note or reference, or a stale trace, fails the build before anything is
  written (one line each). It also sets the nav in reading order (lesson, source, trace,
  reference, maintaining) unless mkdocs.yml has one: the generated pages could not be listed there.
- ``on_page_markdown``: replace ``[[…]]`` references by links (page line + upstream permalink), then
  ``{{value …}}`` and ``{{= …}}`` placeholders (:mod:`annotate.pages.lesson.lesson_values`, :mod:`annotate.claims`),
  then a 引用 cite button under each display formula with its ``{{code …}}`` lines (:mod:`annotate.pages.lesson.lesson_formulas`).
  Last, a generated page's big HTML blocks are set aside behind placeholders (:mod:`annotate.render.held`):
  Markdown would only pass them through, after parsing every tag of them twice.
- ``on_page_content``: put the held blocks back (their anchors into the page's, for MkDocs' link validation),
  sanitise hand-written pages, render arithmatex's ``$…$`` / ``$$…$$`` spans with
  KaTeX at build time, and draw the element-level diagrams (``{{diagram NAME}}``, :mod:`annotate.pages.lesson.diagrams`).
- ``on_post_template`` / ``on_post_build``: 404.html with relative links, no source maps
  (:mod:`annotate.render.offline`); the search index refined so that symbols and notes land on their
  lines (:mod:`annotate.search_index`).
- ``on_serve``: also watch ``vendor/``, ``notes/``, ``traces/`` and ``map/`` (``Project.watched``).
"""
from __future__ import annotations

import logging
import secrets
from pathlib import Path
from typing import Callable, Iterable, TypeVar

from mkdocs.config import config_options as opt
from mkdocs.config.base import Config
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.plugins import BasePlugin, CombinedEvent, event_priority
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

from annotate import claims, codec, references, safe_html, search_index
from annotate.docs_math import render_page_math
from annotate.errors import UserError
from annotate.pages.lesson import diagrams
from annotate.pages.lesson import lesson_formulas
from annotate.pages.lesson import lesson_values
from annotate.pages.source import providers
from annotate.pages.source.generate import generate
from annotate.pages.experiments.experiment_page import experiment_pages
from annotate.pages.lesson.map_page import MAP_URI, render_map
from annotate.pages.base.nav import site_nav
from annotate.pages.base.snapshot import Snapshot, build_snapshot
from annotate.pages.source.source_page import lean_math
from annotate.pages.traces.trace_pages import trace_pages
from annotate.pages.base.trace_set import NOTICE_LOGGER
from annotate.project import Project
from annotate.render import offline
from annotate.render.assets import site_assets
from annotate.render.held import HeldBlocks, set_aside
from annotate.render.katex import Katex, shared

log = logging.getLogger("mkdocs.plugins.annotate")
#: outside MkDocs' loggers, so a strict build prints these warnings without failing on them
notice_log = logging.getLogger(NOTICE_LOGGER)
_T = TypeVar("_T")


class AnnotateConfig(Config):
    root = opt.Type(str, default=".")  # project root, relative to mkdocs.yml


def _page_text(file: File, docs_label: str) -> str:
    """A hand-written page's text; a byte that is not UTF-8 is the codec's one line (page, offset, fix)."""
    try:
        return file.content_string
    except UnicodeDecodeError:
        return codec.utf8(file.content_bytes, f"{docs_label}/{file.src_uri}")


def _plugin_error(work: Callable[[], _T]) -> _T:
    """Run one room's work; its one-line UserError becomes MkDocs' PluginError (no traceback)."""
    try:
        return work()
    except UserError as exc:
        raise PluginError(str(exc)) from None


class AnnotatePlugin(BasePlugin[AnnotateConfig]):
    """See the module docstring. ``facts`` (set in ``on_files``) is the only state between hooks."""

    facts: Snapshot

    def on_config(self, config: MkDocsConfig) -> MkDocsConfig:
        self.root = (Path(config.config_file_path).parent / self.config.root).resolve()
        self.project = Project.from_config(config, self.root)  # the layout `annotate check` reads too
        self.strict = bool(config.strict)
        self.katex: Katex = shared(self.root)
        self.auto_nav = config.nav is None  # a nav written in mkdocs.yml wins over ours
        self._nonce = secrets.token_hex(8)   # this build's held-block placeholders (annotate.render.held)
        self._held: dict[str, HeldBlocks] = {}
        logging.getLogger("jieba").setLevel(logging.WARNING)  # the search index's segmenter chats on stderr
        return config

    def on_files(self, files: Files, config: MkDocsConfig) -> Files:
        pages = _plugin_error(lambda: {f.src_uri: _page_text(f, self.project.docs_label)
                                       for f in files.documentation_pages()})
        facts = self.facts = _plugin_error(lambda: build_snapshot(self.root, pages, strict=self.strict,
                                                                          docs_label=self.project.docs_label))
        for line in facts.recovered:
            log.info(line)
        review = facts.trace_review
        if review.fatal:
            raise PluginError("\n".join(review.fatal))
        for line in review.warnings:
            log.warning(line)
        for line in review.notices:   # device traces cannot be re-recorded here: reported, never fatal
            notice_log.warning(line)
        lab = _plugin_error(lambda: experiment_pages(self.root, facts.sources))
        site = _plugin_error(lambda: generate(facts, self.katex.render, self.katex.check,
                                              providers.providers(facts.traces, facts.files, lab.compare_links()),
                                              prefetch=self.katex.prefetch))
        three = None if facts.map_rows is None else render_map(facts.map_rows, facts, traces=facts.traces)
        if three:
            site.pages[MAP_URI] = three.markdown
        assets = _plugin_error(lambda: site_assets(self.root))
        traced = _plugin_error(lambda: trace_pages(facts.traces, facts.sources, facts.files))
        self._report([*site.problems, *facts.reference_problems, *(three.problems if three else []), *lab.problems])
        for uri, text in {**site.pages, **site.files, **traced.pages, **traced.files, **lab.pages, **lab.files}.items():
            files.append(File.generated(config, uri, content=text))
        for uri, asset in assets.items():
            files.append(File.generated(config, uri, abs_src_path=str(asset)))
        if self.auto_nav:
            config.nav = site_nav(f.src_uri for f in files.documentation_pages())
        return files

    def _report(self, problems: list[str]) -> None:
        if problems and self.strict:
            raise PluginError("\n".join(problems) + "\nfix these anchors (`annotate check` lists them), "
                              "or build without --strict to skip them")
        for line in problems:
            log.warning(line)

    def on_page_markdown(self, markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
        uri = page.file.src_uri
        markdown = self._expand(markdown, uri)
        if page.file.generated_by is None:
            return markdown
        markdown, held = set_aside(markdown, self._nonce)   # generated HTML skips Markdown's scans (render/held.py)
        if held.blocks:
            self._held[uri] = held
        return markdown

    def _expand(self, markdown: str, uri: str) -> str:
        """A page's placeholders replaced: references, recorded values, computed numbers, cite buttons."""
        facts = self.facts
        markdown = references.expand(markdown, uri, facts.references.get(uri, ()), facts.files)
        # recorded values cited in prose ({{value …}}), then numbers computed from the vendored code ({{= …}})
        markdown = _plugin_error(lambda: lesson_values.expand(markdown, uri, facts.sources, facts.traces,
                                                                     self.project.docs_label, facts.files))
        markdown = _plugin_error(lambda: claims.expand(markdown, uri, self.root, strict=self.strict,
                                                       folder=self.project.docs_label, table=lambda: facts.claims))
        # a 引用 button under each display formula, naming the code its {{code …}} lines point at
        return _plugin_error(lambda: lesson_formulas.expand(markdown, uri, facts.sources, self.project.docs_label,
                                                            facts.files))

    def on_page_content(self, html_text: str, page: Page, config: MkDocsConfig, files: Files) -> str:
        """Put the held blocks back (and their anchors in the page's), sanitise hand-written pages
        (annotate.safe_html), then server-side math (arithmatex, generic mode)."""
        held = self._held.pop(page.file.src_uri, None)
        if held is not None:
            html_text = held.put_back(html_text)
            page.present_anchor_ids = (page.present_anchor_ids or set()) | held.anchor_ids()
        return self._page_content(html_text, page)

    def _page_content(self, html_text: str, page: Page) -> str:
        """`on_page_content`'s work once the page is whole."""
        if page.file.generated_by is None:
            html_text = safe_html.clean(html_text)
        lean = lean_math(self.katex.render)   # no hidden MathML copy: search indexes each formula once, as text
        html_text = _plugin_error(lambda: render_page_math(html_text, lean, f"{self.project.docs_label}/{page.file.src_uri}"))
        html_text = _plugin_error(lambda: diagrams.expand(html_text, self.root, strict=self.strict,
                                                          table=lambda: self.facts.claims, folder=self.project.docs_label,
                                                          page=page.file.src_uri, sources=self.facts.sources,
                                                          files=self.facts.files))
        return search_index.spaced_cells(html_text)   # cells apart in the search index's text

    def on_post_page(self, output: str, page: Page, config: MkDocsConfig) -> str:
        """Drop what only the search index reads (annotate.search_index.strip_search_only): indexed already."""
        return search_index.strip_search_only(output)

    def on_post_template(self, output_content: str, template_name: str, config: MkDocsConfig) -> str:
        """404.html: relative links, so it is styled when opened from disk too (annotate.render.offline)."""
        return offline.relative_root_links(output_content) if template_name == "404.html" else output_content

    @event_priority(-50)   # after Material's search wrote its index (0), before its offline plugin copies it (-100)
    def _refine_search(self, config: MkDocsConfig) -> None:
        """Refine the search index (annotate.search_index: symbols and notes land on their lines)."""
        search_index.refine_file(Path(config["site_dir"]), search_index.source_entries(self.facts))

    @event_priority(-110)   # after Material's offline plugin (-100) wrote search/search_index.js
    def _lean_site(self, config: MkDocsConfig) -> None:
        """Drop Material's source maps: developer-tool files, about 1.3 MB; load the search index on the
        first use of search, one copy (annotate.render.offline)."""
        removed = offline.drop_source_maps(Path(config["site_dir"]))
        log.debug("dropped %d bytes of source maps", removed)
        lazy = offline.lazy_search(Path(config["site_dir"]))
        if lazy.bundle is None and "loader not recognised" in lazy.unchanged:
            log.warning(lazy.unchanged)
        log.debug("search index on first use; dropped %d bytes of its JSON copy", lazy.removed)

    on_post_build = CombinedEvent(_refine_search, _lean_site)   # two steps at two priorities around Material's

    def on_serve(self, server, config: MkDocsConfig, builder):
        for folder in self.project.watched:
            if folder.is_dir():
                server.watch(str(folder))
        server.set_app(refuse_nul_paths(server.get_app()))
        return server


def refuse_nul_paths(app: Callable) -> Callable:
    """The dev server's app behind a check: a path holding a NUL byte (``%00``) is a 400 with one line.

    MkDocs' server passes it to ``open()``, whose ValueError became a 500 and a traceback in the log.
    """
    def guarded(environ: dict, start_response: Callable) -> Iterable[bytes]:
        if "\0" in environ.get("PATH_INFO", "") or "%00" in environ.get("RAW_URI", environ.get("REQUEST_URI", "")):
            start_response("400 Bad Request", [("Content-Type", "text/plain; charset=utf-8")])
            return [b"400 Bad Request: the path holds a NUL byte (%00)\n"]
        return app(environ, start_response)
    return guarded
