"""MkDocs plugin ``annotate``: generates the source pages, resolves prose references, renders math.

Thin glue: the work is in :mod:`annotate.pages` (pages), :mod:`annotate.references` (prose
references) and :mod:`annotate.render.katex` (server-side math). Hooks:

- ``on_files``: vet notes and math, generate ``source/**`` pages (with the values panels of the
  traces under ``traces/``), the ``trace/**`` pages and KaTeX's CSS/fonts; resolve every prose
  reference of the hand-written pages; in strict mode any unresolved note or reference, or a stale
  trace, fails the build before anything is written (one line each).
- ``on_files`` also sets the nav in reading order (lesson, source, trace, reference, maintaining)
  unless mkdocs.yml has one: the generated pages could not be listed there.
- ``on_page_markdown``: replace ``[[…]]`` references by links (page line + upstream permalink).
- ``on_page_content``: render arithmatex's ``$…$`` / ``$$…$$`` spans with KaTeX at build time, and
  draw the element-level diagrams (``{{diagram NAME}}`` lines, see :mod:`annotate.pages.diagrams`).
- ``on_post_template`` / ``on_post_build``: 404.html with relative links, no source maps
  (:mod:`annotate.render.offline`).
- ``on_serve``: also watch ``vendor/``, ``notes/`` and ``traces/``.
"""
from __future__ import annotations

import html
import logging
import re
from pathlib import Path

from mkdocs.config import config_options as opt
from mkdocs.config.base import Config
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.plugins import BasePlugin
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

from annotate import claims, references, safe_html
from annotate.pages import lesson_values
from annotate.pages.source_page import lean_math
from annotate.anchors import Resolution, resolve
from annotate.docs_math import ARITHMATEX
from annotate.errors import UserError
from annotate.guard import recover_outputs
from annotate.links import Links
from annotate.notes import Sources
from annotate.project import Project
from annotate.vendoring.sync import vendored_files, verify_all
from annotate.pages import diagrams, extras
from annotate.pages.generate import generate
from annotate.pages.map_page import MAP_URI, MapPage, load_map, render_map
from annotate.pages.nav import site_nav
from annotate.pages.trace_pages import trace_pages
from annotate.pages.trace_set import TraceSet, load_traces
from annotate.render.assets import site_assets
from annotate.trace.validate import non_finite
from annotate.render.katex import Katex, MathError, shared
from annotate.render import offline

log = logging.getLogger("mkdocs.plugins.annotate")
#: outside MkDocs' loggers, so a strict build prints these warnings without failing on them
notice_log = logging.getLogger("annotate.traces")
_ARITHMATEX = ARITHMATEX


class AnnotateConfig(Config):
    root = opt.Type(str, default=".")  # project root, relative to mkdocs.yml


class AnnotatePlugin(BasePlugin[AnnotateConfig]):
    """See the module docstring."""

    def on_config(self, config: MkDocsConfig) -> MkDocsConfig:
        self.root = (Path(config.config_file_path).parent / self.config.root).resolve()
        self.project = Project.from_config(config, self.root)  # the layout `annotate check` reads too
        self.strict = bool(config.strict)
        self.katex: Katex = shared(self.root)
        self.resolved: dict[str, list[tuple[references.Reference, Resolution]]] = {}  # page -> its references
        self.auto_nav = config.nav is None  # a nav written in mkdocs.yml wins over ours
        logging.getLogger("jieba").setLevel(logging.WARNING)  # the search index's segmenter chats on stderr
        return config

    def on_files(self, files: Files, config: MkDocsConfig) -> Files:
        try:
            self.links = Links(self.root)
            if self.strict:  # publish only what the lock vouches for
                verify_all(self.root)
            traces = self.traces = self._traces()
            ref_problems = self._resolve_references(files)
            three = self._three_framework_map(traces)
            ranges = self._referenced_ranges()
            for path, spans in (three.ranges if three else {}).items():
                ranges.setdefault(path, set()).update(spans)
            site = generate(self.root, self._math, self.katex.check, extras.providers(self.root, traces),
                            links=self.links, ranges=ranges, prefetch=self.katex.prefetch)
            problems = site.problems + ref_problems + (three.problems if three else [])
            if three:
                site.pages[MAP_URI] = three.markdown
            assets = site_assets(self.root)
            traced = trace_pages(self.root, traces)
        except UserError as exc:
            raise PluginError(str(exc)) from None
        self._report(problems)
        for uri, text in {**site.pages, **site.files, **traced.pages, **traced.files}.items():
            files.append(File.generated(config, uri, content=text))
        for uri, asset in assets.items():
            files.append(File.generated(config, uri, abs_src_path=str(asset)))
        if self.auto_nav:
            config.nav = site_nav(f.src_uri for f in files.documentation_pages())
        return files

    def _traces(self) -> TraceSet:
        """The traces under traces/; a stale one fails a strict build, else is shown with its values withheld."""
        for line in recover_outputs(self.root, self.project.traces):  # a trace an interrupted swap moved aside
            log.info(line)
        traces = load_traces(self.root, self.links.lock.upstream.commit if self.links.lock else None)
        stale = traces.refusals()
        for view in traces.views if self.strict else ():
            if problem := non_finite(view.trace):
                raise UserError(problem)
        if stale and self.strict:
            raise UserError("\n".join(stale) + "\n(a strict build refuses stale traces; `annotate build --no-strict` "
                            "builds with their values withheld from the changed files)")
        for line in stale:
            log.warning(line)
        for line in traces.notices():   # device traces cannot be re-recorded here: reported, never fatal
            notice_log.warning(line)
        return traces

    def _three_framework_map(self, traces: TraceSet) -> MapPage | None:
        """The 三框架映射 page from map/decoder-block.yml (None when the project has no map file), with the
        identities the default trace found by comparison."""
        rows = load_map(self.root)
        view = next((v for v in traces.views if not v.pin_moved), None)
        return None if rows is None else render_map(self.root, rows, self.links, trace=view.trace if view else None)

    def _math(self, tex: str, display: bool) -> str:
        return self.katex.render(tex, display)

    def _resolve_references(self, files: Files) -> list[str]:
        """Resolve every ``[[…]]`` on the hand-written pages now, so problems fail early."""
        vendored, sources, problems = vendored_files(self.root), Sources(self.root), []
        self.resolved = {}
        for file in files.documentation_pages():
            for ref in references.find_references(file.content_string, file.src_uri, vendored,
                                                   self.project.docs_label):
                resolution = resolve(ref.anchor, sources.get(ref.anchor.path))
                self.resolved.setdefault(file.src_uri, []).append((ref, resolution))
                if not resolution.ok:
                    problems.append(references.unresolved_message(ref, resolution))
        return problems

    def _referenced_ranges(self) -> dict[str, set[tuple[int, int]]]:
        """Path -> multi-line spans that prose references link to (they need an anchor id)."""
        ranges: dict[str, set[tuple[int, int]]] = {}
        for ref, resolution in (pair for pairs in self.resolved.values() for pair in pairs):
            if resolution.ok and resolution.span and resolution.span[1] > resolution.span[0]:
                ranges.setdefault(ref.anchor.path, set()).add(resolution.span)
        return ranges

    def _report(self, problems: list[str]) -> None:
        if problems and self.strict:
            raise PluginError("\n".join(problems) + "\nfix these anchors (`annotate check` lists them), "
                              "or build without --strict to skip them")
        for line in problems:
            log.warning(line)

    def on_page_markdown(self, markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
        uri = page.file.src_uri
        pairs = self.resolved.get(uri, [])
        outcome = {id(ref): resolution for ref, resolution in pairs}
        markdown = references.substitute(markdown, [ref for ref, _ in pairs],
                                         lambda ref: self._render_reference(uri, ref, outcome[id(ref)]))
        try:   # recorded values cited in prose ({{value …}}, see annotate.pages.lesson_values)
            markdown = lesson_values.expand(markdown, uri, self.root, getattr(self, "traces", None))
        except UserError as exc:
            raise PluginError(str(exc)) from None
        return self._expand_claims(markdown, uri)

    def _expand_claims(self, markdown: str, uri: str) -> str:
        """``{{= claim }}`` numbers computed from the vendored code (see annotate.claims)."""
        try:
            return claims.expand(markdown, uri, self.root, strict=self.strict, folder=self.project.docs_label)
        except UserError as exc:
            raise PluginError(str(exc)) from None

    def _render_reference(self, uri: str, ref: references.Reference, resolution: Resolution) -> str:
        if not resolution.ok:
            return f'<span class="an-ref-broken" title="{html.escape(resolution.describe())}">{html.escape(ref.raw)}</span>'
        return references.render(ref, resolution, self.links, uri)

    def on_page_content(self, html_text: str, page: Page, config: MkDocsConfig, files: Files) -> str:
        """Sanitise hand-written pages (annotate.safe_html), then server-side math (arithmatex, generic mode)."""
        if page.file.generated_by is None:
            html_text = safe_html.clean(html_text)
        lean = lean_math(self._math)   # no hidden MathML copy: search indexes each formula once, as text

        def render(m: re.Match) -> str:
            tex = html.unescape(m.group(2))
            try:
                return lean(tex, m.group(1) == "div")
            except MathError as exc:
                raise PluginError(f"{self.project.docs_label}/{page.file.src_uri}: math ${tex}$: {exc}; fix the LaTeX") from None

        html_text = _ARITHMATEX.sub(render, html_text)
        try:
            return diagrams.expand(html_text, self.root, strict=self.strict)
        except UserError as exc:
            raise PluginError(str(exc)) from None

    def on_post_template(self, output_content: str, template_name: str, config: MkDocsConfig) -> str:
        """404.html: relative links, so it is styled when opened from disk too (annotate.render.offline)."""
        return offline.relative_root_links(output_content) if template_name == "404.html" else output_content

    def on_post_build(self, config: MkDocsConfig) -> None:
        """Drop Material's source maps: developer-tool files, about 1.3 MB (annotate.render.offline)."""
        removed = offline.drop_source_maps(Path(config["site_dir"]))
        log.debug("dropped %d bytes of source maps", removed)

    def on_serve(self, server, config: MkDocsConfig, builder):
        for folder in self.project.watched:
            if folder.is_dir():
                server.watch(str(folder))
        return server
