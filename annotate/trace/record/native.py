"""The recorder's hot path compiled to C by mypyc, loaded only while it is built from the source beside it.

Every line event of a recorded forward runs Python: the monitor's callbacks, the recorder's
handlers, the copy table, and after the forward the alias groups. mypyc (part of mypy) compiles
these same typed modules to C extension modules, with no second copy of the code: the modules in
:data:`MODULES` are the ones compiled. Measured at the tiny shape (bench/bench_trace.py, docs/guide/performance.md),
that removes about a tenth of the recorder's cost: the rest is the work its Python asked for (the
clones, the frames' locals, the containers that hold them), not the interpreting of it.

* **Build** (`annotate native`, run by `make site` and `make test` for each venv): the modules are
  copied to a temporary folder and compiled there, and the extension files land in
  `annotate/trace/record/_native/<interpreter tag>/`, with a stamp (:class:`Stamp`) holding the SHA-256 of
  each source file as it was compiled. It needs a C compiler, the interpreter's headers and mypy.
  Without them it says so in one line, and the recorder stays Python.
* **Load** (:func:`install`, when `annotate.trace` is first imported): a finder on `sys.meta_path`
  serves the compiled files for those module names, but only when the stamp was made by this very
  interpreter and every source file still hashes to what was compiled. Otherwise the Python sources
  load as if nothing had been built: a source edited since the build, a stamp from another
  interpreter, no build at all, or ``ANNOTATE_NATIVE=0`` in the environment. So a stale binary
  can never stand in for changed code.

Both give the same records, field by field and byte for byte (`tests/test_native.py`).
:data:`STATE` says which one this process runs, and the benchmark writes it into its rows.
"""
from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from types import ModuleType
from typing import Mapping, Sequence

#: the modules compiled, lowest first: everything that runs per line event or per recorded statement
MODULES = ("annotate.trace.record.identity", "annotate.trace.record.aliasing", "annotate.trace.record.copies",
           "annotate.trace.record.monitor", "annotate.trace.record.recorder")
#: mypyc's group: the compiled modules share one library, whose module name mypyc derives from it
GROUP = "annotate.trace.record._hot"
LIBRARY = f"{GROUP}__mypyc"
#: the environment switch: "0" loads the Python sources even when a build is in place
ENV = "ANNOTATE_NATIVE"
PACKAGE = Path(__file__).resolve().parent
#: where builds go, one folder per interpreter tag (`cpython-311`, `cpython-312`)
NATIVE_DIR = PACKAGE / "_native"
STAMP_NAME = "stamp.json"


def build_dir(tag: str | None = None) -> Path:
    """The folder of this interpreter's build (or of interpreter tag `tag`)."""
    return NATIVE_DIR / (tag or sys.implementation.cache_tag)


def stem(module: str) -> str:
    """`annotate.trace.record.recorder` → `recorder`: the name of a module's files in its folder."""
    return module.rsplit(".", 1)[1]


def source_of(module: str, package: Path = PACKAGE) -> Path:
    """The source file of one of :data:`MODULES` (or of any `annotate.trace.X`)."""
    return package / f"{stem(module)}.py"


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class Stamp:
    """What a build compiled, written last into its folder (one model for the writer and the reader)."""

    python: str               # `sys.version` of the interpreter that built it
    sources: dict[str, str]   # module -> SHA-256 of the source file compiled
    files: dict[str, str]     # module (and the group's library) -> extension file name in the folder
    mypy: str

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str) -> Stamp:
        """The stamp in `text`; ValueError when it is not one."""
        data = json.loads(text)
        if not isinstance(data, dict) or set(data) != {"python", "sources", "files", "mypy"}:
            raise ValueError("not a stamp")
        for key in ("sources", "files"):
            if not isinstance(data[key], dict) or not all(isinstance(v, str) for v in data[key].values()):
                raise ValueError(f"stamp: {key} is not a table of names")
        return cls(str(data["python"]), dict(data["sources"]), dict(data["files"]), str(data["mypy"]))


@dataclass(frozen=True)
class Plan:
    """What `import annotate.trace.…` loads: compiled files by module name (empty: the Python sources),
    and why, in one line."""

    files: dict[str, Path]
    status: str

    @property
    def active(self) -> bool:
        return bool(self.files)


def load_plan(folder: Path | None = None, package: Path = PACKAGE, env: dict[str, str] | None = None) -> Plan:
    """Whether the build in `folder` (this interpreter's by default) may stand in for the sources in
    `package`: every check the finder relies on, none of which raises."""
    folder = folder or build_dir()
    environ: Mapping[str, str] = os.environ if env is None else env
    if environ.get(ENV, "1") == "0":
        return Plan({}, f"off ({ENV}=0): the recorder runs as Python")
    stamp_file = folder / STAMP_NAME
    if not stamp_file.is_file():
        return Plan({}, "off (not built for this interpreter; `annotate native` builds it): the recorder runs as Python")
    try:
        stamp = Stamp.from_json(stamp_file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return Plan({}, f"off ({stamp_file} is unreadable; `annotate native` rebuilds it): the recorder runs as Python")
    if stamp.python != sys.version:
        return Plan({}, "off (built by another interpreter; `annotate native` rebuilds it): the recorder runs as Python")
    for module in MODULES:
        try:
            current = digest(source_of(module, package).read_bytes())
        except OSError:
            current = ""
        if stamp.sources.get(module) != current:
            return Plan({}, f"off ({module} changed since the build; `annotate native` rebuilds it): "
                            "the recorder runs as Python")
    files = {name: folder / file for name, file in stamp.files.items()}
    if set(MODULES) - set(files) or not all(p.is_file() for p in files.values()):
        return Plan({}, f"off (the build in {folder} is incomplete; `annotate native` rebuilds it): the recorder runs as Python")
    return Plan(files, f"on (compiled by mypyc {stamp.mypy} from the current sources)")


class _Finder(importlib.abc.MetaPathFinder):
    """Serves the compiled files of a :class:`Plan` for their module names, and nothing else."""

    def __init__(self, files: dict[str, Path]) -> None:
        self.files = files

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        file = self.files.get(fullname)
        return None if file is None else importlib.util.spec_from_file_location(fullname, file)


#: what this process loads (set by `install`, which `annotate/trace/__init__.py` calls first)
STATE = Plan({}, "off (not installed)")


def install() -> Plan:
    """Put the finder in front of the import system when the build may be used (once per process,
    before any of :data:`MODULES` is imported; a module already imported stays as it was)."""
    global STATE
    if any(isinstance(f, _Finder) for f in sys.meta_path):
        return STATE
    loaded = [m for m in MODULES if m in sys.modules]
    got = load_plan()
    if got.active and loaded:
        got = Plan({}, f"off ({', '.join(loaded)} imported before the finder): the recorder runs as Python")
    if got.active:
        sys.meta_path.insert(0, _Finder(got.files))
    STATE = got
    return got
