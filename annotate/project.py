"""The project's layout: one typed record of where every folder is, so no module spells a path itself.

The hand-written pages' folder (``docs_dir``) and the output folder (``site_dir``) are MkDocs'
settings: they are read from ``mkdocs.yml`` and resolved the way MkDocs resolves them (relative to
the config file, MkDocs' own defaults when absent), so `annotate check` and the build read the same
pages. The project's own folders (``notes/``, ``traces/``, ``vendor/``, ``map/``) are defined once
here, as class-level defaults; each upstream's folder under ``vendor/`` comes from its lock
(:mod:`annotate.vendoring.registry`).

Two constructors: :meth:`Project.load` reads ``<root>/mkdocs.yml`` (commands), and
:meth:`Project.from_config` takes the ``MkDocsConfig`` MkDocs already loaded (the plugin's
``on_config``). Both end in the same fields, so the build and `annotate check` agree by construction.
"""
from __future__ import annotations

import functools
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, ClassVar

from annotate.errors import UserError

if TYPE_CHECKING:
    from mkdocs.config.defaults import MkDocsConfig

#: MkDocs' defaults of ``docs_dir`` and ``site_dir`` (tests/test_project.py checks them against MkDocs' own):
#: what a config without the setting means, and how messages name a page when no config is at hand
DOCS_FOLDER = "docs"
SITE_FOLDER = "site"
_DEFAULTS = {"docs_dir": DOCS_FOLDER, "site_dir": SITE_FOLDER}


@dataclass(frozen=True)
class DocsPage:
    """One hand-written page as MkDocs lists it: its docs-relative URI and its file."""

    uri: str
    path: Path


@dataclass(frozen=True)
class Project:
    """Where a project's inputs and outputs are (absolute paths), read from its mkdocs.yml."""

    root: Path
    config_file: Path
    docs_dir: Path
    site_dir: Path
    loaded: MkDocsConfig | None = field(default=None, compare=False, repr=False)

    #: the MkDocs config file in the project root
    CONFIG_NAME: ClassVar[str] = "mkdocs.yml"
    #: notes data, one YAML file per annotated vendored file
    NOTES_DIR: ClassVar[str] = "notes"
    #: recorded traces, one folder each
    TRACES_DIR: ClassVar[str] = "traces"
    #: the locks (``<name>.lock.json``) and each upstream's materialised folder (``<name>/``)
    VENDOR_DIR: ClassVar[str] = "vendor"
    #: the three-framework map's data
    MAP_DIR: ClassVar[str] = "map"
    #: what-if experiments: one YAML file each, edits by anchor (annotate/experiments.py)
    EXPERIMENTS_DIR: ClassVar[str] = "experiments"
    #: the experiments' traces, one folder each (annotate/experiment_run.py writes them)
    EXPERIMENT_TRACES_DIR: ClassVar[str] = "traces/experiments"
    #: git-ignored working files (downloaded wheels, output locks, computed claims)
    CACHE_DIR: ClassVar[str] = ".cache"

    # ------------------------------------------------------------ constructors

    @classmethod
    def load(cls, root: Path) -> Project:
        """The layout of the project at ``root``: ``root/mkdocs.yml`` read as MkDocs reads it.

        A missing or unreadable config, or a ``docs_dir``/``site_dir`` that is not a folder name (or
        names no folder), is one UserError line naming the file, the setting and the fix.
        """
        root = Path(root).resolve()
        config_file = root / cls.CONFIG_NAME
        raw = _read_yaml(config_file)
        docs_dir = _setting(raw, "docs_dir", config_file)
        docs, site = _folder(config_file, docs_dir), _folder(config_file, _setting(raw, "site_dir", config_file))
        if not docs.is_dir():
            raise UserError(f"{config_file}: docs_dir {docs_dir!r} is not a folder "
                            f"({docs}); create it or set docs_dir to the folder of the hand-written pages")
        if docs == config_file.parent or docs in config_file.parent.parents:
            raise UserError(f"{config_file}: docs_dir {docs} holds the config file itself; "
                            "put the hand-written pages in a folder of their own (MkDocs' default: docs)")
        return cls(root, config_file, docs, site)

    @classmethod
    def from_config(cls, config: MkDocsConfig, root: Path) -> Project:
        """The layout from a config MkDocs already loaded and validated (``root``: the project root)."""
        return cls(Path(root).resolve(), Path(config.config_file_path).resolve(), Path(config.docs_dir).resolve(),
                   Path(config.site_dir).resolve(), config)

    # ------------------------------------------------------------ folders

    @property
    def docs_label(self) -> str:
        """The docs folder as messages name it (``docs``, ``pages``): relative to the root when inside it."""
        return self.rel(self.docs_dir)

    @property
    def inputs(self) -> tuple[str, ...]:
        """The project's input folders, root-relative: no output may be one, inside one or around one."""
        return _inputs(self.docs_label)

    @property
    def watched(self) -> tuple[Path, ...]:
        """What `annotate serve` watches besides docs_dir (MkDocs watches that one itself)."""
        return tuple(self.root / folder for folder in (self.VENDOR_DIR, self.NOTES_DIR, self.TRACES_DIR, self.MAP_DIR,
                                                      self.EXPERIMENTS_DIR))

    def rel(self, path: Path) -> str:
        """``path`` as messages name it: root-relative POSIX when inside the root, else as given."""
        try:
            return Path(path).resolve().relative_to(self.root).as_posix()
        except ValueError:
            return str(path)

    # ------------------------------------------------------------ MkDocs' view

    @functools.cached_property
    def mkdocs_config(self) -> MkDocsConfig:
        """The full, validated MkDocs config (loaded on first use when :meth:`load` built this)."""
        return self.loaded if self.loaded is not None else _load_mkdocs(self.config_file)

    def pages(self) -> list[DocsPage]:
        """The hand-written Markdown pages exactly as the build lists them (MkDocs' own file discovery:
        ``exclude_docs``, drafts and README/index handling included), sorted by URI."""
        from mkdocs.structure.files import get_files

        files = get_files(self.mkdocs_config).documentation_pages()
        return sorted((DocsPage(f.src_uri, Path(f.abs_src_path or self.docs_dir / f.src_uri)) for f in files),
                      key=lambda p: p.uri)


def project_if_any(root: Path) -> Project | None:
    """:meth:`Project.load`, or None for a folder without mkdocs.yml (a bare vendor checkout: no pages)."""
    return Project.load(root) if (Path(root) / Project.CONFIG_NAME).is_file() else None


def project_inputs(root: Path) -> tuple[str, ...]:
    """:attr:`Project.inputs` of ``root``; for a folder that is no (valid) project, those of the default
    layout, so the output guard still protects what a project would have."""
    try:
        return Project.load(root).inputs
    except UserError:
        return _inputs(DOCS_FOLDER)


def _inputs(docs_label: str) -> tuple[str, ...]:
    """The input folders, root-relative and once each, of a project whose pages are in ``docs_label``."""
    return tuple(dict.fromkeys((docs_label, Project.NOTES_DIR, Project.VENDOR_DIR, Project.TRACES_DIR,
                                Project.MAP_DIR, Project.EXPERIMENTS_DIR, ".git")))


def _read_yaml(config_file: Path) -> dict[str, Any]:
    """The config file's settings, read with MkDocs' own YAML loader (``!ENV``, ``!!python/name:``, INHERIT).

    Where MkDocs is not installed (the GPU image runs `annotate trace` without the site's tools), a
    safe loader that reads any tag it does not know as null: enough for docs_dir and site_dir.
    """
    if not config_file.is_file():
        raise UserError(f"{config_file}: missing; restore it with `git checkout -- {config_file.name}`")
    try:
        with open(config_file, "rb") as fd:
            raw = _yaml_load(fd)
    except ImportError as exc:  # a !!python/name: tag naming a module that is not installed
        raise UserError(f"{config_file}: cannot be read ({exc}); install it or fix the YAML") from None
    except ValueError as exc:  # yaml's errors arrive as MkDocs' ConfigurationError or yaml.YAMLError
        first = " ".join(str(exc).split())[:300]
        raise UserError(f"{config_file}: cannot be read ({first}); fix the YAML") from None
    except OSError as exc:
        raise UserError(f"{config_file}: cannot be read ({exc.strerror}); make it readable") from None
    if not isinstance(raw, dict):
        raise UserError(f"{config_file}: expected a mapping of settings (site_name: …), got {type(raw).__name__}; "
                        "fix the file")
    return raw


def _yaml_load(fd: BinaryIO) -> Any:
    """MkDocs' loader when MkDocs is installed, else the tolerant safe loader (see :func:`_read_yaml`)."""
    import yaml

    try:
        from mkdocs.exceptions import ConfigurationError
        from mkdocs.utils.yaml import yaml_load
    except ImportError:
        class Tolerant(yaml.SafeLoader):
            """Safe YAML; an unknown tag (``!ENV``, ``!!python/name:…``) is read as null."""

        Tolerant.add_multi_constructor("", lambda loader, suffix, node: None)
        try:
            return yaml.load(fd, Loader=Tolerant)  # a SafeLoader subclass: builds no Python objects
        except yaml.YAMLError as exc:
            raise ValueError(str(exc)) from None
    try:
        return yaml_load(fd)
    except ConfigurationError as exc:
        raise ValueError(str(exc)) from None


def _setting(raw: dict[str, Any], setting: str, config_file: Path) -> str:
    """A folder setting's value as MkDocs reads it: its default when absent or null (``docs_dir: ~``)."""
    value = raw.get(setting)
    if value is None:
        value = _DEFAULTS[setting]
    if not isinstance(value, str) or not value.strip():
        raise UserError(f"{config_file}: {setting} is {value!r}, not a folder name; "
                        f"write e.g. `{setting}: {_DEFAULTS[setting]}` in {config_file.name}")
    return value


def _folder(config_file: Path, value: str) -> Path:
    """A folder setting resolved as MkDocs resolves it: relative to the config file's folder."""
    return Path(os.path.normpath(config_file.parent / value)).resolve()


def _load_mkdocs(config_file: Path) -> MkDocsConfig:
    """MkDocs' full config, its validation errors as one UserError line (MkDocs logs them, then aborts)."""
    from mkdocs.config import load_config
    from mkdocs.exceptions import ConfigurationError

    errors = _Errors()
    try:
        return load_config(str(config_file))
    except ConfigurationError as exc:
        detail = "; ".join(errors.lines) or str(exc)
        raise UserError(f"{config_file}: {detail}; fix the setting") from None
    finally:
        errors.close()


class _Errors(logging.Handler):
    """MkDocs' config errors while loading (its Python API only logs them)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.lines: list[str] = []
        logging.getLogger("mkdocs").addHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(" ".join(record.getMessage().split()))

    def close(self) -> None:
        logging.getLogger("mkdocs").removeHandler(self)
        super().close()
