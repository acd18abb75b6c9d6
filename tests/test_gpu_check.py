"""scripts/gpu-check.sh, rehearsed on the CPU against a copy of the GPU image's layout.

The lent H200 image (device notes, KINDS.md) has a `python3` that is itself a virtual environment
holding torch, triton 3.6, transformers 5.x, tokenizers 0.23 and huggingface-hub 1.x, and no
tree-sitter. Here that layout is rebuilt from real packages: a venv made from this project's base
interpreter, with torch 2.13.0 (CPU; this venv's own files, hard-linked, when it is that version),
triton 3.6, transformers 5.17.0, tokenizers 0.23.2,
huggingface-hub 1.33.0, numpy, safetensors, xxhash, pyyaml, requests, regex, tqdm and pytest
installed into it (each is in the image), and no
tree-sitter (cached in the machine's test cache, tests/once.py, keyed by those versions). Then the exact GPU
command runs with GPU_CHECK_REHEARSE=1 (device cpu; every install and PYTHONPATH line the same),
carrying the cp311 builds of the ten wheels of scripts/gpu-wheels.txt. The script of commit
16d644e is run against the same layout and must fail.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from conftest import ROOT, _need_vendor
from once import locked, machine_cache

#: what the image holds that matters here (KINDS.md, 2026-11); torch is this project's CPU pin
IMAGE_PACKAGES = ("torch==2.13.0", "triton==3.6.0", "transformers==5.17.0", "tokenizers==0.23.2",
                  "huggingface-hub==1.33.0", "numpy", "safetensors", "xxhash", "pyyaml", "requests", "regex",
                  "tqdm", "pytest")
#: the image venv (keyed by its package versions) and the carried wheels: in the machine's test cache (tests/once.py),
#: so a fresh clone does not build another 2 GB venv (~30 s) for the same versions
CACHE = machine_cache("gpu-rehearsal")
OLD_SCRIPT_COMMIT = "16d644e"
PYVER = f"{sys.version_info.major}.{sys.version_info.minor}"

BLOCK_TREE_SITTER = """
import sys
class Blocker:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("tree_sitter", "tree_sitter_python"):
            raise ModuleNotFoundError(f"blocked: {name}", name=name)
sys.meta_path.insert(0, Blocker())
"""


def _run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=kw.pop("timeout", 600), **kw)


def _base_python() -> str:
    """This project's interpreter without its venv (the image's venv is made from a plain Python)."""
    for name in (f"python{PYVER}", "python3"):
        exe = Path(sys.base_prefix) / "bin" / name
        if exe.is_file():
            return str(exe)
    pytest.skip(f"no base interpreter under {sys.base_prefix}")


def image_python() -> Path:
    """The rehearsal's image interpreter: a venv with IMAGE_PACKAGES and no tree-sitter (built once)."""
    key = hashlib.sha256(" ".join(IMAGE_PACKAGES).encode()).hexdigest()[:12]
    env = CACHE / f"image-py{PYVER}-{key}"
    py = env / "bin" / "python"
    CACHE.mkdir(parents=True, exist_ok=True)
    with locked(CACHE / "image.lock"):   # another checkout's run may be making it on this machine
        if not (env / ".complete").is_file():
            _make_image(env)
    return py


def _make_image(env: Path) -> None:
    """Build the image venv `env` (see :func:`image_python`), marked complete last."""
    wheels = CACHE / "image-wheels"
    got = _run([sys.executable, "-m", "pip", "download", "--quiet", "--only-binary=:all:", "--dest", str(wheels),
                *IMAGE_PACKAGES])
    if got.returncode != 0:
        pytest.skip(f"cannot download the image's packages: {got.stderr.strip().splitlines()[-1:]}")
    for stale in CACHE.glob(f"image-py{PYVER}-*"):     # an image of other versions (about 2 GB each)
        subprocess.run(["rm", "-rf", str(stale)], check=True)
    made = _run([_base_python(), "-m", "venv", str(env)])
    assert made.returncode == 0, made.stderr
    _link_torch(env)   # pip then finds it installed, and installs only what it lacks
    # --no-compile: byte-compiling every module of transformers, sympy and triton was 28 of the 38 s this install
    # took; the few modules a rehearsal imports are compiled when first imported, as anywhere
    inst = _run([str(env / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-compile", "--no-index",
                 "--find-links", str(wheels), *IMAGE_PACKAGES])
    assert inst.returncode == 0, inst.stderr[-2000:]
    (env / ".complete").write_text("\n".join(IMAGE_PACKAGES) + "\n", encoding="utf-8")


def _link_torch(env: Path) -> None:
    """Hard-link this venv's torch (its files and dist-info, as its RECORD lists them) into the image
    venv `env` when it is the version IMAGE_PACKAGES pins: the same files pip would unpack from the same
    wheel, without unpacking and byte-compiling ~900 MB again (about a minute of CPU on a fresh clone).
    Nothing is left behind when it is another version or a link fails: then pip installs it."""
    try:
        dist = metadata.distribution("torch")
    except metadata.PackageNotFoundError:
        return
    if f"torch=={dist.version.split('+')[0]}" not in IMAGE_PACKAGES or not dist.files:
        return
    site = Path(str(dist.locate_file("")))
    dest = env / "lib" / f"python{PYVER}" / "site-packages"
    tops = sorted({f.parts[0] for f in dist.files if f.parts[0] != ".." and (site / f.parts[0]).exists()})
    for top in tops:
        if _run(["cp", "-al", str(site / top), str(dest / top)]).returncode != 0:
            subprocess.run(["rm", "-rf", *(str(dest / t) for t in tops)], check=True)
            return


def carried_wheels() -> Path:
    """The ten wheels of scripts/gpu-wheels.txt for this Python (the GPU run carries the cp312 ones)."""
    listed = [ln for ln in (ROOT / "scripts" / "gpu-wheels.txt").read_text(encoding="utf-8").splitlines()
              if ln.strip() and not ln.lstrip().startswith("#")]
    # keyed by the pins: a checkout that pins other versions gets its own folder, never these wheels
    dest = CACHE / f"carried-py{PYVER}-{hashlib.sha256(chr(10).join(listed).encode()).hexdigest()[:12]}"
    with locked(CACHE / "carried.lock"):
        if len(list(dest.glob("*.whl"))) != len(listed):
            subprocess.run(["rm", "-rf", str(dest)], check=True)
            got = _run(["bash", str(ROOT / "scripts" / "gpu-wheels.sh"), str(dest), PYVER],
                       cwd=ROOT, env=dict(os.environ, PYTHON=sys.executable))
            if got.returncode != 0:
                pytest.skip(f"cannot download the carried wheels: {got.stderr.strip().splitlines()[-1:]}")
    return dest


def test_the_trace_cli_imports_without_tree_sitter() -> None:
    """`annotate trace`'s parser and the modules of the trace path load without tree-sitter (the
    image lacks it until the carried wheels are installed): it is imported when a file is first parsed."""
    code = BLOCK_TREE_SITTER + """
from annotate.cli import build_parser
args = build_parser().parse_args(["trace", "--preset", "tiny"])
assert args.func.__module__ == "annotate.cli.trace"
import annotate.trace.pipeline, annotate.trace.reports.report, annotate.trace.model.runtime, annotate.trace.reports.bandwidth
import annotate.trace.format.store, annotate.trace.record.sourcemap, annotate.source
print("ok")
"""
    proc = _run([sys.executable, "-c", code], cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]
    blocked = _run([sys.executable, "-c", BLOCK_TREE_SITTER + "import annotate.source\nannotate.source.parse('x = 1')"],
                   cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert blocked.returncode != 0 and "blocked: tree_sitter" in blocked.stderr   # the blocker does block


def test_recording_without_tree_sitter_is_one_clear_line(tmp_path: Path) -> None:
    """Recording maps the traced lines to the tree-sitter model's statements: without tree-sitter
    the trace stops with one line naming what is missing and the fix, no traceback, no trace."""
    _need_vendor()
    out = tmp_path / "trace"
    code = BLOCK_TREE_SITTER + "from annotate.cli import main\nraise SystemExit(main(sys.argv[1:]))\n"
    proc = _run([sys.executable, "-c", code, "--root", str(ROOT), "trace", "--preset", "tiny", "--layers", "1",
                 "--tokens", "3", "--out", str(out)], cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("annotate: error:")]
    assert "building the vendored model" not in proc.stdout + proc.stderr   # refused before the slow part
    assert proc.returncode != 0 and len(errors) == 1, proc.stderr[-2000:]
    assert errors[0].startswith("annotate: error: tracing needs tree-sitter") and "blocked: tree_sitter" in errors[0]
    assert "make install" in errors[0] and "scripts/gpu-check.sh" in errors[0]
    assert "Traceback" not in proc.stderr + proc.stdout and not out.exists()


def test_the_wheel_list_carries_exactly_ten_and_never_numpy_or_pytest() -> None:
    lines = [ln.strip() for ln in (ROOT / "scripts" / "gpu-wheels.txt").read_text().splitlines()
             if ln.strip() and not ln.lstrip().startswith("#")]
    names = {ln.split("==")[0] for ln in lines}
    assert names == {"transformers", "tokenizers", "huggingface-hub", "tree-sitter", "tree-sitter-python",
                     "pydantic", "pydantic-core", "annotated-types", "typing-inspection", "typing-extensions"}
    assert all("==" in ln for ln in lines)


def test_the_step_timeouts_fit_one_device_command() -> None:
    text = (ROOT / "scripts" / "gpu-check.sh").read_text(encoding="utf-8")
    limits = [int(x) for x in re.findall(r"^\s*run [\w-]+ (\d+) ", text, re.M)]
    # one device command runs at most 600 s, and a drawn task has 15 minutes of device time in all: the steps
    # take at most 480 s, so a rerun fits; the header says the sum
    assert len(limits) >= 8 and sum(limits) <= 480, limits
    assert f"sum to {sum(limits)} s" in text


@pytest.mark.slow
def test_a_venv_made_from_the_image_python_cannot_see_its_torch(tmp_path: Path) -> None:
    """Why the old recipe (`python3 -m venv --system-site-packages`) broke: the image's python3 is a
    venv, so a venv made from it sees the base interpreter's packages, not the image's torch."""
    image = image_python()
    child = tmp_path / "child"
    assert _run([str(image), "-m", "venv", "--without-pip", "--system-site-packages", str(child)]).returncode == 0
    assert _run([str(image), "-c", "import torch"]).returncode == 0
    proc = _run([str(child / "bin" / "python"), "-c", "import torch"])
    assert proc.returncode != 0 and "No module named 'torch'" in proc.stderr


def _inductor_cache() -> str:
    """Inductor's cache folder for this process (TORCHINDUCTOR_CACHE_DIR, else its default under the temp folder)."""
    from torch._inductor.runtime.cache_dir_utils import cache_dir
    return cache_dir()


def travelling_tree(dest: Path, wheels: Path) -> Path:
    """What reaches the device: the tracked files and the untracked ones git does not ignore (no .git,
    nothing ignored) plus the carried paths vendor/nano-vllm and gpu-wheels, as the device tool's `run`
    sends them: a file not yet committed travels too."""
    names = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, check=True).stdout
    for name in filter(None, names.decode().split("\0")):
        src = ROOT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    shutil.copytree(ROOT / "vendor" / "nano-vllm", dest / "vendor" / "nano-vllm")
    shutil.copytree(wheels, dest / "gpu-wheels")
    return dest


@pytest.mark.slow
def test_the_gpu_check_passes_as_a_cpu_rehearsal_in_the_image_layout(tmp_path: Path) -> None:
    _need_vendor()
    image, wheels = image_python(), carried_wheels()
    assert _run([str(image), "-c", "import tree_sitter"]).returncode != 0          # the image lacks it
    tree = travelling_tree(tmp_path / "tree", wheels)
    out = tmp_path / "OUT"
    # the image's python3 first on PATH, as there; PYTHON unset, as there
    # Inductor's cache where this run's other traces keep theirs (by default it follows TMPDIR into tmp_path, and
    # every rehearsal compiled its shapes cold: ~50 s of its ~125); the GPU machine starts cold either way
    env = dict(os.environ, PATH=f"{image.parent}:{os.environ.get('PATH', '')}", GPU_CHECK_REHEARSE="1",
               PYTHONPATH="/kept/from/before", PYTHONUNBUFFERED="1", TMPDIR=str(tmp_path),
               TORCHINDUCTOR_CACHE_DIR=_inductor_cache())
    for name in ("VIRTUAL_ENV", "PYTHON"):
        env.pop(name, None)
    # the documented command, run where the tree lands
    proc = _run(["bash", "scripts/gpu-check.sh", str(out), "gpu-wheels"], cwd=tree, env=env)
    log = (out / "gpu-check.log").read_text(encoding="utf-8")
    assert proc.returncode == 0, log[-4000:]
    head = log[: log.index("== carried wheels")]
    assert f"python {PYVER}" in head and "is a venv: True" in head and "transformers         5.17.0" in head
    assert "tree-sitter          (not installed)" in head and "torch 2.13.0" in head
    assert re.search(rf"^python {PYVER}\.\d+ {re.escape(str(image.parent))}/python3?$", head, re.M)  # from PATH
    site = re.search(r"^PYTHONPATH (\S+?):" + re.escape(f"{tree}:/kept/from/before") + "$", log, re.M)
    assert site and site[1].endswith("/site") and not Path(site[1]).exists()   # its temp folder removed
    assert "imported: transformers 4.57.6 | tokenizers 0.22.2 | huggingface-hub 0.36.2" in log
    trace = json.loads((out / "cpu" / "trace.json").read_text(encoding="utf-8"))
    assert trace["meta"]["compiled"]["ran_compiled"] and trace["meta"]["device"] == "cpu"
    # recording maps lines through tree-sitter (annotate/source.py): the carried wheels provide it
    carried = log[log.index("== carried wheels"):]
    assert re.search(r"^  tree-sitter +\d", carried, re.M) and re.search(r"^  tree-sitter-python +\d", carried, re.M)
    assert trace["records"] and all(f["statements"] for f in trace["functions"])
    assert trace["meta"]["versions"]["transformers"] == "4.57.6"
    assert "cpp_fused" in (out / "cpu" / "kernels.txt").read_text(encoding="utf-8")
    bandwidth = json.loads((out / "cpu" / "bandwidth.json").read_text(encoding="utf-8"))
    assert bandwidth["method"]["timer"] == "time.perf_counter around the loop"
    assert 0 < bandwidth["fraction_of_copy"]["fused"] and bandwidth["fused_vs_eager"]["x"]["max_ulps"] <= 2
    bench = json.loads((out / "cpu" / "bench-trace.json").read_text(encoding="utf-8"))
    modes = {(r["mode"], r["device"]) for r in bench["rows"] if r["preset"] == "tiny"}
    assert {("lines", "cpu"), ("lines + replays", "cpu")} <= modes and bench["device"] == "cpu"
    scale = json.loads((out / "full-depth" / "scale.json").read_text(encoding="utf-8"))
    depth = json.loads((out / "full-depth" / "trace.json").read_text(encoding="utf-8"))
    assert scale["rc"] == 0 and (scale["layers"], scale["tokens"]) == (2, 16) == (depth["meta"]["model"]["layers"],
                                                                               depth["meta"]["input"]["tokens"])
    assert scale["max_allocated_gib"] is None and scale["predicted_gib"] > 0   # no CUDA peak on a CPU
    assert set(scale["timings"]) >= {"build", "record", "identify", "hf lines"} and scale["statuses"]["match"] > 0
    assert sum(scale["statuses"].values()) == sum(1 for r in depth["records"] for v in r["vars"] if v.get("identity"))
    files = [p for p in out.rglob("*") if p.is_file()]
    assert len(files) <= 8 and all(len(p.relative_to(out).parts) <= 3 for p in files), files
    # all of it under OUT: the tree's traces/ holds what git tracks there (the committed H200 traces), nothing more
    tracked = subprocess.run(["git", "ls-files", "traces"], cwd=ROOT, capture_output=True, text=True, check=True)
    assert sorted(p.relative_to(tree).as_posix() for p in (tree / "traces").rglob("*") if p.is_file()) \
        == sorted(tracked.stdout.split())
    assert "self.input_layernorm(hidden_states" not in log   # the trace reports quote vendored lines: they stay out
    assert "done: every step passed" in log


@pytest.mark.slow
def test_the_old_gpu_check_fails_in_the_image_layout(tmp_path: Path) -> None:
    """The script (and code) of 16d644e, rehearsed with the image's interpreter: it dies before tracing."""
    _need_vendor()
    image = image_python()
    old = tmp_path / "old"
    old.mkdir()
    archive = subprocess.run(["git", "archive", OLD_SCRIPT_COMMIT], cwd=ROOT, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(old)], input=archive, check=True)
    (old / "vendor" / "nano-vllm").symlink_to(ROOT / "vendor" / "nano-vllm")
    out = tmp_path / "cuda"
    env = dict(os.environ, PYTHON=str(image), GPU_CHECK_OUT=str(out))
    env.pop("VIRTUAL_ENV", None)
    proc = _run(["bash", str(old / "scripts" / "gpu-check.sh"), "--rehearse"], cwd=old, env=env)
    assert proc.returncode != 0
    assert "No module named 'tree_sitter" in proc.stdout + proc.stderr
    assert not (out / "trace.json").exists()


# ---------------------------------------------------------------- refusals before any step (CPU rehearsal)

def _pinned_wheels() -> list[tuple[str, str]]:
    lines = [ln.split("#")[0].strip() for ln in (ROOT / "scripts" / "gpu-wheels.txt").read_text().splitlines()]
    return [tuple(ln.split("==")) for ln in lines if ln]  # type: ignore[misc]


def fake_wheels(dest: Path, change: dict[str, str] | None = None) -> Path:
    """Empty files named as the five carried wheels are (NAME-VERSION-py3-none-any.whl, NAME with '_');
    ``change`` maps a name to another version. The preflight reads names only, so nothing is installed."""
    dest.mkdir()
    for name, version in _pinned_wheels():
        version = (change or {}).get(name, version)
        (dest / f"{name.replace('-', '_')}-{version}-py3-none-any.whl").write_bytes(b"")
    return dest


def rehearse(out: str, wheels: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    """The documented command as the CPU rehearsal runs it; PYTHON is `false`, so were the refusal missed
    every step would fail fast (and the assertions below would see the log it wrote)."""
    env = dict(os.environ, GPU_CHECK_REHEARSE="1", PYTHON="false", TMPDIR=str(tmp_path))
    return _run(["bash", "scripts/gpu-check.sh", out, str(wheels)], cwd=ROOT, env=env, timeout=120)


def _refused(proc: subprocess.CompletedProcess, says: str) -> None:
    lines = proc.stderr.splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith("gpu-check: error: "), proc.stderr
    assert says in lines[0] and proc.stdout == "", proc.stdout[-2000:]
    assert "== interpreter" not in proc.stdout + proc.stderr     # refused before step 1


@pytest.mark.parametrize("where", ["file", "file/sub", "/proc/gpu-check-out", "/proc/gpu-check-out/deep"])
def test_an_outdir_that_cannot_be_made_is_refused_before_any_step(where: str, tmp_path: Path) -> None:
    """Before, `mkdir -p` failed, `cd` failed, OUTDIR became empty and the log went to /gpu-check.log,
    the trace to /cpu, rc 0. /proc refuses folders even to root, where `test -w` would pass."""
    wheels = fake_wheels(tmp_path / "wheels")
    (tmp_path / "file").write_text("mine\n", encoding="utf-8")
    out = where if where.startswith("/") else str(tmp_path / where)
    had_log = Path("/gpu-check.log").exists()
    proc = rehearse(out, wheels, tmp_path)
    _refused(proc, f"OUTDIR {out} ")
    assert "give a" in proc.stderr and "$OUT" in proc.stderr                          # the fix
    assert (tmp_path / "file").read_text(encoding="utf-8") == "mine\n"
    assert Path("/gpu-check.log").exists() == had_log and not (ROOT / "cpu").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "wheels"]            # no temp folder left


def test_a_refused_outdir_leaves_none_of_its_parents(tmp_path: Path) -> None:
    """A deep OUTDIR whose parents are made but which cannot be written (a path through a file) leaves nothing."""
    wheels = fake_wheels(tmp_path / "wheels")
    (tmp_path / "file").write_text("mine\n", encoding="utf-8")
    proc = rehearse(str(tmp_path / "file" / "a" / "b"), wheels, tmp_path)
    _refused(proc, "cannot be created or written")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "wheels"]


@pytest.mark.parametrize("change, says", [
    ({"tokenizers": "0.23.2"}, "tokenizers==0.23.2"),        # the image's own version: would break the import
    ({"transformers": "5.17.0"}, "transformers==5.17.0"),
])
def test_carried_wheels_of_other_versions_are_refused_before_any_step(change: dict[str, str], says: str,
                                                                      tmp_path: Path) -> None:
    """The old check compared names only: a wheel of another version passed and failed later, on the device."""
    wheels = fake_wheels(tmp_path / "wheels", change)
    out = tmp_path / "OUT"
    proc = rehearse(str(out), wheels, tmp_path)
    _refused(proc, says)
    assert "scripts/gpu-wheels.txt" in proc.stderr and "make gpu-wheels" in proc.stderr
    assert not out.exists()


def test_missing_wheels_are_refused_before_any_step(tmp_path: Path) -> None:
    proc = rehearse(str(tmp_path / "OUT"), tmp_path / "nowhere", tmp_path)
    _refused(proc, "is not a folder of wheels")
    assert not (tmp_path / "OUT").exists()


def test_good_inputs_pass_the_preflight(tmp_path: Path) -> None:
    """The same checks let a writable, missing OUTDIR and the exact wheels through: the steps run (and,
    with PYTHON=false, fail), the log lands in OUTDIR, no probe file is left."""
    wheels = fake_wheels(tmp_path / "wheels")
    out = tmp_path / "new" / "OUT"
    proc = rehearse(str(out), wheels, tmp_path)
    assert proc.returncode == 1 and "gpu-check: error" not in proc.stderr, proc.stderr[-2000:]
    log = (out / "gpu-check.log").read_text(encoding="utf-8")
    assert "== interpreter" in log and "done with failures" in log
    assert not [p for p in out.iterdir() if p.name.startswith(".gpu-check-probe")]


def test_a_tree_without_the_vendored_copy_is_refused_before_any_step(tmp_path: Path) -> None:
    """The travelling tree without vendor/nano-vllm (not carried): refused at once, not a failed trace step."""
    tree = tmp_path / "tree"
    shutil.copytree(ROOT / "scripts", tree / "scripts")
    wheels = fake_wheels(tmp_path / "wheels")
    env = dict(os.environ, GPU_CHECK_REHEARSE="1", PYTHON="false", TMPDIR=str(tmp_path))
    proc = _run(["bash", "scripts/gpu-check.sh", str(tmp_path / "OUT"), str(wheels)], cwd=tree, env=env, timeout=120)
    _refused(proc, "vendor/nano-vllm/nanovllm/models/qwen3.py is missing: carry vendor/nano-vllm")
    assert not (tmp_path / "OUT").exists()
