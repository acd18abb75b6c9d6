"""`annotate check | build | serve`: argument parsing and progress; the work is in notes/pages/plugin."""
from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from annotate.errors import UserError
from annotate.progress import Progress
from annotate.project import Project


def register(sub: argparse._SubParsersAction) -> None:
    check = sub.add_parser("check", help="resolve every note and prose reference against the vendored code",
                           description="One line per note and prose reference: file, entry, and exact / moved / "
                           "changed (with the nearest statements) / vanished. Also vets every formula with KaTeX.")
    check.add_argument("--strict", action="store_true", help="exit 1 if anything is changed or vanished")
    check.add_argument("--no-math", action="store_true", help="skip the KaTeX check of the notes' formulas")
    check.add_argument("--no-claims", action="store_true",
                       help="skip the lesson's computed claims (they run the vendored code in a child process)")
    check.set_defaults(func=run_check)

    build = sub.add_parser("build", help="build the site into site/ (strict by default)",
                           description="Run `mkdocs build` with mkdocs.yml into a temp folder and swap it into "
                           "place, so site/ is never half-written. Strict by default: an unresolved note or "
                           "reference, bad LaTeX or any MkDocs warning fails the build.")
    build.add_argument("--no-strict", dest="strict", action="store_false", help="warn instead of failing")
    build.add_argument("--site-dir", type=Path, default=None, help="output folder (default: mkdocs.yml's site_dir)")
    build.add_argument("--force", action="store_true",
                       help="build even when no input changed since the last strict build of this folder "
                            "(by default that build is kept: annotate/build_inputs.py says what counts as input)")
    build.set_defaults(func=run_build, strict=True)

    serve = sub.add_parser("serve", help="serve the site with live reload (watches vendor/, notes/, traces/)")
    serve.add_argument("--dev-addr", default="127.0.0.1:8000", help="address to listen on")
    serve.set_defaults(func=run_serve)


def run_check(args: argparse.Namespace) -> int:
    from annotate import claims, project_anchors
    from annotate.render.katex import shared
    from annotate.vendoring.sync import verify_all

    project = Project.load(args.root)  # the build's docs_dir and page list, from mkdocs.yml
    verify_all(project.root)  # the strict build's vendor verdict (every upstream), first
    math_check = None if args.no_math else shared(project.root).check
    report = project_anchors.check(project, math_check=math_check)
    print(report.render())
    if math_check is not None:  # the pages' formulas too, as the strict build renders them
        from annotate.docs_math import check_docs

        bad_math = check_docs(project, math_check)
        if bad_math:
            raise UserError(bad_math[0] + (f" (and {len(bad_math) - 1} more)" if len(bad_math) > 1 else ""))
    from annotate.pages.lesson.map_truth import check_project

    contradicted, unchecked = check_project(project.root)   # the map's float32 statements vs the float32 trace
    for line in contradicted:
        print(f"map    {line}")
    print(f"map float32: {unchecked or ('all hold' if not contradicted else f'{len(contradicted)} contradicted')}")
    broken = [] if args.no_claims else claims.scan_claims(project)
    for line in broken:
        print(f"claim  {line}")
    if not args.no_claims:
        print(f"computed claims: {'all hold' if not broken else f'{len(broken)} no longer hold'}")
    return 1 if args.strict and (not report.ok or broken or contradicted) else 0


def run_build(args: argparse.Namespace) -> int:
    from annotate.build_inputs import inputs_digest, read_stamp

    project = Project.load(args.root)
    target = (args.site_dir or project.site_dir).resolve()
    progress = Progress()
    digest = inputs_digest(project) if args.strict else None
    if digest is not None and not args.force and is_previous_site(target) and read_stamp(target) == digest:
        progress.say(f"[build] {project.rel(target)} is up to date: no input changed since its strict build "
                     "(pass --force to build anyway)")
        return 0
    with progress.step("build", f"mkdocs build{' --strict' if args.strict else ''} → {target}"):
        build_site(project.root, target, strict=args.strict, digest=digest)
    return 0


def build_site(root: Path, target: Path, strict: bool = True, digest: str | None = None) -> None:
    """Build into a sibling temp folder, then swap it in; on any failure ``target`` is untouched.
    ``digest``: the inputs' digest (annotate/build_inputs.py), left in the output so that the next
    strict build with the same inputs can keep it; taken before the build, so an input that changes
    during the build makes the next one rebuild rather than be skipped."""
    from mkdocs.commands.build import build
    from mkdocs.config import load_config
    from mkdocs.exceptions import Abort, ConfigurationError, PluginError

    from annotate import guard

    project = Project.load(root)  # a missing or unreadable mkdocs.yml is one line, before anything
    guard.refuse_unsafe_output(root, target, "--site-dir", inputs=project.inputs, ours=is_previous_site)
    guard.refuse_uncreatable(target, "--site-dir")
    target.parent.mkdir(parents=True, exist_ok=True)
    with guard.output_lock(root, target, "--site-dir"):
        _build_and_swap(project.config_file, target, strict, (Abort, ConfigurationError, PluginError), build, load_config,
                        digest)


def is_previous_site(folder: Path) -> bool:
    """A folder `annotate build` wrote: it carries the marker (or, from before the marker, MkDocs' own index)."""
    from annotate.guard import OUTPUT_MARKER

    return (folder / OUTPUT_MARKER).is_file() or ((folder / "search" / "search_index.json").is_file()
                                           and (folder / "index.html").is_file())


def _build_and_swap(config_file: Path, target: Path, strict: bool, failures: tuple, build, load_config,
                    digest: str | None = None) -> None:
    """MkDocs into a hidden staging folder beside ``target`` (git-ignored, swept next time), then the swap."""
    from annotate.atomic import replace_dir
    from annotate.build_inputs import write_stamp
    from annotate.guard import mark

    log = _MkDocsLog()
    try:
        with replace_dir(target) as staged:
            config = load_config(str(config_file), strict=strict, site_dir=str(staged))
            build(config)
            mark(staged)
            if digest is not None:
                write_stamp(staged, digest)
    except failures as exc:
        raise UserError("\n".join(log.errors) or f"build failed: {exc}; see the warnings above") from None
    finally:
        log.close()


_PAGE_ERROR = ("Error reading page", "Error building page")


class _MkDocsLog(logging.Handler):
    """MkDocs' warnings on stderr, one line each; its errors kept for the one error message we print.

    MkDocs' CLI installs such a handler; its Python API does not, and it turns a plugin's error
    into a generic "Aborted with a BuildError!" whose real message only goes to the log.
    """

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.errors: list[str] = []
        logging.getLogger("mkdocs").addHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if record.levelno >= logging.ERROR:
            if self.errors and self.errors[-1].startswith(_PAGE_ERROR) and self.errors[-1].endswith(":"):
                self.errors[-1] += " " + message  # MkDocs logs "Error reading page 'x':", then the plugin's line
            else:
                self.errors.append(message)
        else:
            print(f"WARNING - {message}", file=sys.stderr)

    def close(self) -> None:
        logging.getLogger("mkdocs").removeHandler(self)
        super().close()


def run_serve(args: argparse.Namespace) -> int:
    from mkdocs.commands.serve import serve

    config_file = Project.load(args.root).config_file
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)-7s -  %(message)s"))
    logger = logging.getLogger("mkdocs")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    serve(config_file=str(config_file), dev_addr=args.dev_addr, livereload=True)
    return 0
