"""annotate/trace/record/native.py: the mypyc build of the recorder's per-line modules loads only when it was
built by this interpreter from the sources beside it, and it records exactly what the Python
recorder records.

The checks of `plan` run on a made-up package and build folder. The others need the real build,
which `make test` makes for each venv (`annotate native`). Where it could not be built (no C
compiler, headers or mypy), they skip and say why.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from annotate.trace.record import native
from annotate.trace.record.native import LIBRARY, MODULES, STAMP_NAME, Stamp, digest, load_plan, source_of
from conftest import OTHER_CLI as _CLI
from conftest import ROOT, record_tiny_in, tiny_trace_py312


def _fake(tmp_path: Path) -> tuple[Path, Path]:
    """A package holding the modules' sources and a complete build of them, stamped."""
    package, folder = tmp_path / "pkg", tmp_path / "build"
    package.mkdir()
    folder.mkdir()
    for m in MODULES:
        source_of(m, package).write_text(f"# {m}\n", encoding="utf-8")
    files = {m: native.stem(m) + ".so" for m in (*MODULES, LIBRARY)}
    for f in files.values():
        (folder / f).write_bytes(b"")
    stamp = Stamp(sys.version, {m: digest(source_of(m, package).read_bytes()) for m in MODULES}, files, "0")
    (folder / STAMP_NAME).write_text(stamp.to_json(), encoding="utf-8")
    return package, folder


def test_a_build_of_the_current_sources_is_used(tmp_path: Path) -> None:
    package, folder = _fake(tmp_path)
    got = load_plan(folder, package, env={})
    assert got.active and got.status.startswith("on")
    assert set(got.files) == {*MODULES, LIBRARY}
    assert got.files["annotate.trace.record.recorder"] == folder / "recorder.so"


def test_a_source_edited_since_the_build_turns_it_off(tmp_path: Path) -> None:
    package, folder = _fake(tmp_path)
    path = source_of("annotate.trace.record.copies", package)
    path.write_text(path.read_text(encoding="utf-8") + "x = 1\n", encoding="utf-8")
    got = load_plan(folder, package, env={})
    assert not got.active and "annotate.trace.record.copies changed since the build" in got.status


def test_a_build_by_another_interpreter_is_not_used(tmp_path: Path) -> None:
    package, folder = _fake(tmp_path)
    stamp = Stamp.from_json((folder / STAMP_NAME).read_text(encoding="utf-8"))
    (folder / STAMP_NAME).write_text(Stamp("3.0.0", stamp.sources, stamp.files, stamp.mypy).to_json(), encoding="utf-8")
    got = load_plan(folder, package, env={})
    assert not got.active and "another interpreter" in got.status


@pytest.mark.parametrize("text", ["", "{", "[]", '{"python": 1}', '{"python": "x", "sources": [], "files": {}, "mypy": ""}',
                                  '{"python": "x", "sources": {"a": 1}, "files": {}, "mypy": ""}'])
def test_an_unreadable_stamp_is_off_and_never_raises(tmp_path: Path, text: str) -> None:
    package, folder = _fake(tmp_path)
    (folder / STAMP_NAME).write_text(text, encoding="utf-8")
    got = load_plan(folder, package, env={})
    assert not got.active and "unreadable" in got.status


def test_not_built_a_file_missing_or_switched_off(tmp_path: Path) -> None:
    package, folder = _fake(tmp_path)
    assert load_plan(folder, package, env={native.ENV: "0"}).status.startswith(f"off ({native.ENV}=0)")
    assert load_plan(folder, package, env={native.ENV: "1"}).active
    (folder / "copies.so").unlink()
    assert "incomplete" in load_plan(folder, package, env={}).status
    assert "not built" in load_plan(tmp_path / "none", package, env={}).status


def test_the_stamp_round_trips() -> None:
    stamp = Stamp("3.12.1 (main)", {"a": "00"}, {"a": "a.so"}, "2.4.1")
    assert Stamp.from_json(stamp.to_json()) == stamp


def test_the_finder_serves_its_modules_only(tmp_path: Path) -> None:
    _, folder = _fake(tmp_path)
    finder = native._Finder({"annotate.trace.record.recorder": folder / "recorder.so"})
    spec = finder.find_spec("annotate.trace.record.recorder")
    assert spec is not None and spec.origin == str(folder / "recorder.so")
    assert finder.find_spec("annotate.trace.model.numerics") is None


# ------------------------------------------------------------ the real build


def _need_build() -> None:
    if not native.STATE.active:
        pytest.skip(f"the native recorder is not in use here: {native.STATE.status}")


def test_the_compiled_modules_are_what_imports_get() -> None:
    _need_build()
    import annotate.trace.record.copies
    import annotate.trace.record.recorder

    for module in (annotate.trace.record.recorder, annotate.trace.record.copies):
        spec = module.__spec__
        assert spec is not None and spec.origin is not None
        # (mypyc's module init sets its own path below the build folder: only where it came from matters)
        assert Path(spec.origin).is_relative_to(native.build_dir()) and not spec.origin.endswith(".py")


def test_native_up_to_date_is_a_quick_no_op_and_a_missing_compiler_one_line() -> None:
    _need_build()
    stamp = (native.build_dir() / STAMP_NAME).read_bytes()
    res = subprocess.run([sys.executable, "-c", _CLI, "--root", str(ROOT), "native"], capture_output=True, text=True,
                         timeout=120, check=False, cwd=ROOT)
    assert res.returncode == 0 and "up to date" in res.stderr, res.stderr
    env = {**os.environ, "PATH": "/nonexistent"}   # no compiler to be found: refused before anything is touched
    res = subprocess.run([sys.executable, "-c", _CLI, "--root", str(ROOT), "native", "--force"], capture_output=True,
                         text=True, timeout=120, check=False, cwd=ROOT, env=env)
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert res.stderr.strip().count("\n") == 0 and "no C compiler" in res.stderr and "runs as Python" in res.stderr
    assert (native.build_dir() / STAMP_NAME).read_bytes() == stamp


def _interpreters() -> list[str]:
    """This Python, and the 3.12 one `make test` names in ANNOTATE_PY312 (the sys.monitoring path)."""
    found = [sys.executable]
    other = os.environ.get("ANNOTATE_PY312", "")
    if other and Path(other).is_file() and sys.version_info < (3, 12):
        found.append(other)
    return found


@pytest.mark.slow
@pytest.mark.parametrize("python", _interpreters(), ids=lambda p: "this python" if p == sys.executable else "py312")
def test_compiled_and_python_record_the_same_tiny_trace(tmp_path: Path, python: str,
                                                        tmp_path_factory: pytest.TempPathFactory,
                                                        request: pytest.FixtureRequest) -> None:
    """The tiny trace recorded by the mypyc build and by the Python sources: every field of every
    record equal (timings aside), the tensors byte for byte. The compiled side is a run the session made
    anyway, with the same command: on 3.12 its sys.monitoring trace (conftest.tiny_trace_py312, which
    test_monitor reads too), on this interpreter the tiny trace most tests read (conftest.tiny_trace,
    recorded in a test process, every tensor kept as tiny traces are) when the compiled recorder made it;
    the Python side always runs in a fresh process."""
    status = subprocess.run([python, "-c", "from annotate.trace.record import native; print(native.STATE.status)"],
                            capture_output=True, text=True, timeout=120, check=True, cwd=ROOT).stdout.strip()
    if not status.startswith("on"):
        pytest.skip(f"{python}: the native recorder is not in use: {status}")
    payloads, outs = {}, {}
    for mode, switch in (("compiled", "1"), ("python", "0")):
        if mode == "compiled" and python != sys.executable:
            out = tiny_trace_py312(tmp_path_factory, python)
        elif mode == "compiled" and (session := request.getfixturevalue("tiny_trace")).payload["meta"]["recorder"]["compiled"]:
            out = session.out
        else:
            out = tmp_path / mode
            record_tiny_in(python, out, env={native.ENV: switch})
        outs[mode] = out
        payloads[mode] = json.loads((out / "trace.json").read_text(encoding="utf-8"))
        assert payloads[mode]["meta"]["recorder"]["compiled"] is (mode == "compiled")
    a, b = payloads["compiled"], payloads["python"]
    assert len(a["records"]) == len(b["records"]) > 300
    for ra, rb in zip(a["records"], b["records"]):
        assert {k: v for k, v in ra.items() if k != "timing"} == {k: v for k, v in rb.items() if k != "timing"}
    assert {k: v for k, v in a["meta"]["recorder"].items() if k != "compiled"} == \
        {k: v for k, v in b["meta"]["recorder"].items() if k != "compiled"}
    assert (outs["compiled"] / "tensors.safetensors").read_bytes() == \
        (outs["python"] / "tensors.safetensors").read_bytes()
