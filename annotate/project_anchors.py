"""Every anchor a project holds, gathered in one place: notes, prose references, the map's and the
experiments' edits, and the check report over all of them.

This room sits above :mod:`annotate.notes`, :mod:`annotate.references`, :mod:`annotate.framework_map`
and :mod:`annotate.experiments` (which read their YAML through notes' parser), so none of them needs to
import another to be listed: `annotate check` and `vendor update` call here.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from annotate import experiments, framework_map, references
from annotate.anchors import Anchor, resolve
from annotate.notes import CheckEntry, CheckReport, Sources, load_all, note_anchors, vet_math
from annotate.project import Project
from annotate.vendoring.sync import vendored_files


def all_anchors(root: Path) -> list[Anchor]:
    """Every anchor the project holds: notes first, then prose references in docs/, then the map's (with origins)."""
    return _anchors(root)


def check(project: Project, math_check: Callable[[str], str | None] | None = None) -> CheckReport:
    """Resolve every note and prose reference; ``math_check`` (LaTeX -> error or None) also vets math."""
    sources = Sources(project.root)
    return CheckReport(tuple(CheckEntry(resolve(a, sources.get(a.path))) for a in _anchors(project, math_check)))


def _anchors(project: Project | Path, math_check: Callable[[str], str | None] | None = None) -> list[Anchor]:
    """Notes first, then prose references on the pages, then the map's, then the experiments' edits: what
    :func:`all_anchors` and :func:`check` both list; ``math_check`` vets the notes' math before the pages are read."""
    root = project.root if isinstance(project, Project) else project
    vendored = _vendored_once(project)
    files = load_all(root, set(vendored))
    if math_check is not None:
        vet_math(files, math_check)
    return (note_anchors(files) + [r.anchor for r in references.scan_references(project, vendored)]
            + framework_map.map_anchors(root) + experiments.experiment_anchors(root))


def _vendored_once(project: Project | Path) -> list[str]:
    """The vendored paths, walked once for the notes and the pages' references alike.

    Empty, with no walk, when neither needs them (a bare root with no ``notes/`` and no mkdocs.yml),
    so a missing copy is still no error there, as when each walked on its own.
    """
    if isinstance(project, Project):
        return vendored_files(project.root)
    wanted = (project / Project.NOTES_DIR).is_dir() or (project / Project.CONFIG_NAME).is_file()
    return vendored_files(project) if wanted else []
