"""`annotate native`: compile the recorder's hot path (`native.MODULES`) with mypyc for this interpreter.

The package is copied to a temporary folder and compiled there, so that the source compiled is the
source hashed into the stamp, whatever is edited meanwhile. The extension files then replace this
interpreter's build folder in one swap (`atomic.replace_dir`), the stamp written last; a failed or
interrupted build leaves the previous build (or none) as it was. `native.py` decides at import
whether a build may be used.
"""
from __future__ import annotations

import importlib.machinery
import importlib.util
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

from annotate.errors import UserError
from annotate.progress import Progress
from annotate.trace.record import native

#: run by the interpreter being built for, in the temporary copy: mypyc type-checks and compiles the
#: paths it is given (the package's own modules are found beside them), setuptools builds in place
_SETUP = """\
import sys
from setuptools import setup
from mypyc.build import mypycify

setup(name="annotate-native", script_args=["build_ext", "--inplace"],
      ext_modules=mypycify(["--ignore-missing-imports", *sys.argv[2:]], group_name=sys.argv[1], opt_level="3"))
"""


def toolchain_problem() -> str | None:
    """What this interpreter lacks to build (None: nothing): mypyc, a C compiler, its own headers."""
    if importlib.util.find_spec("mypyc") is None:
        return "mypyc is not installed in this venv (it comes with mypy: pip install mypy)"
    cc = str(sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(cc) is None:
        return f"no C compiler ({cc}) on PATH (Debian: apt-get install gcc)"
    include = Path(sysconfig.get_paths()["include"])
    if not (include / "Python.h").is_file():
        return f"no headers for this Python ({include}/Python.h; Debian: apt-get install python3-dev)"
    return None


def _mypy_version() -> str:
    from mypy.version import __version__

    return str(__version__)


def _compiled_dir(work: Path) -> Path:
    """Where the compiled modules sit in the copy of the package in ``work`` (annotate/trace/record)."""
    return work / native.PACKAGE.relative_to(native.PACKAGE.parents[2])


def _compile(work: Path, progress: Progress) -> subprocess.CompletedProcess[str]:
    """Run mypyc over the copied modules in `work`; its output is kept for a failure's message."""
    (work / "setup_native.py").write_text(_SETUP, encoding="utf-8")
    paths = [native.source_of(m, _compiled_dir(work)).relative_to(work).as_posix() for m in native.MODULES]
    with progress.step("native", f"compiling {len(paths)} modules of the recorder with mypyc (a minute or two)"):
        return subprocess.run([sys.executable, "setup_native.py", native.GROUP, *paths], cwd=work,
                              capture_output=True, text=True)


def build_native(progress: Progress, force: bool = False) -> native.Plan:
    """Build (unless this interpreter's build already matches the sources, or `force`); returns the
    plan a fresh process will load. UserError, with the previous build untouched, when it cannot."""
    current = native.load_plan(env={})
    if current.active and not force:
        progress.say(f"[native] up to date for Python {sys.version.split()[0]}: {current.status}")
        return current
    problem = toolchain_problem()
    if problem:
        raise UserError(f"native build: {problem}; the recorder runs as Python (same records, slower)")
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    with tempfile.TemporaryDirectory(prefix="annotate-native-") as tmp:
        work = Path(tmp)
        shutil.copytree(native.PACKAGE.parents[1], work / "annotate",
                        ignore=shutil.ignore_patterns("__pycache__", "_native", "*.so"))
        compiled = _compiled_dir(work)
        sources = {m: native.digest(native.source_of(m, compiled).read_bytes()) for m in native.MODULES}
        done = _compile(work, progress)
        files = {m: native.stem(m) + suffix for m in (*native.MODULES, native.LIBRARY)}
        missing = [f for f in files.values() if not (compiled / f).is_file()]
        if done.returncode or missing:
            log = native.NATIVE_DIR / f"build-{sys.implementation.cache_tag}.log"   # kept until a build succeeds
            log.parent.mkdir(parents=True, exist_ok=True)
            log.write_text(done.stdout + done.stderr, encoding="utf-8")
            last = next((ln for ln in reversed((done.stdout + done.stderr).splitlines()) if ln.strip()), "no output")
            raise UserError(f"native build: mypyc failed (exit {done.returncode}): {last.strip()[:200]}; "
                            f"full output in {log}; the recorder runs as Python (same records, slower)")
        stamp = native.Stamp(sys.version, sources, files, _mypy_version())
        from annotate.atomic import replace_dir

        with replace_dir(native.build_dir()) as staged:
            for f in files.values():
                shutil.copy2(compiled / f, staged / f)
            (staged / native.STAMP_NAME).write_text(stamp.to_json(), encoding="utf-8")
    (native.NATIVE_DIR / f"build-{sys.implementation.cache_tag}.log").unlink(missing_ok=True)   # an earlier failure's
    got = native.load_plan(env={})
    progress.say(f"[native] built for Python {sys.version.split()[0]} in {native.build_dir()}: {got.status}")
    return got
