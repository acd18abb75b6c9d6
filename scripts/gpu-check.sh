#!/usr/bin/env bash
# GPU check for `annotate trace`: ONE command on the lent H200 image; everything it makes lands in
# OUTDIR (give it the machine's $OUT: only that folder comes back, at most 8 files, 2 folders deep).
#
#   scripts/gpu-check.sh OUTDIR [WHEELS_DIR]        (WHEELS_DIR default: gpu-wheels)
#
# OUTDIR/gpu-check.log        everything this script printed (interpreter and versions first)
# OUTDIR/cuda/trace.json      CUDA trace: qwen3-0.6b shape, 4 layers, 32 tokens, bfloat16, real
#                             Triton kernels (format: docs/trace-format.md)
# OUTDIR/cuda/kernels.txt     the captured kernel source, one block per compiled function
# OUTDIR/cuda/bandwidth.json  fused add_rms_forward vs its eager body vs a copy of the same bytes
# OUTDIR/cuda/bench-trace.json  the recorder's cost on the GPU: bench/bench_trace.py's overhead rows
#                             (tiny and qwen3-0.6b 4L 32T shapes, lines and lines + replays, the floors)
# OUTDIR/full-depth/trace.json  the whole qwen3-0.6b shape: 28 layers, 512 tokens, bfloat16
# OUTDIR/full-depth/scale.json  that trace's peak device memory (torch.cuda.max_memory_allocated(), read in
#                             the process that traced), what `annotate budget` predicts for it, the trace's
#                             stage times (meta.timings) and how many identities ended in each status
#
# The image (the device tool's notes on the nvidia-h200 kind): python3 is itself a venv with torch 2.11+CUDA,
# triton 3.6, transformers 5.x, tokenizers 0.23, huggingface-hub 1.x; no tree-sitter; no network.
# nano-vllm @2f214426 needs transformers < 5, and transformers 4.57.6 refuses the image's tokenizers
# and huggingface-hub, and the image has no pydantic (the trace schema), so exactly the ten wheels of
# scripts/gpu-wheels.txt travel with the tree.
# They are installed with `pip install --no-index --no-deps --target SITE` and SITE goes first on
# PYTHONPATH (before the image's site-packages; an existing PYTHONPATH is kept after it).
#
# Before the call, here (network):   make site && make gpu-wheels      (fills gpu-wheels/, ignored)
# The call, with the device tool's `run`:
#   command:  bash scripts/gpu-check.sh "$OUT" gpu-wheels
#   carry:    ["vendor/nano-vllm", "gpu-wheels"]
#   timeout_s: 540          (the step timeouts below sum to 480 s; about 4 minutes are
#                           expected, plus the machine's start)
# Afterwards, here: copy the returned cuda/ folder to traces/cuda and commit it (trace.json,
# kernels.txt, bandwidth.json hold no upstream text: tests/test_no_upstream_text.py checks), and
# bench-trace.json to bench/results/trace-cuda.json (then `python -m annotate.bench_table` puts it in
# docs/guide/performance.md); full-depth/scale.json's peak and stage times beside the earlier ones in
# bench/results/gpu-h200-full-depth.json (tests/test_budget.py holds the budget to them); the log is for reading. The site shows the trace on today's lines even after a vendor update.
#
# Rehearsal on a CPU (tests/test_gpu_check.py runs it against a copy of the image's layout):
#   GPU_CHECK_REHEARSE=1 PATH=/path/to/image-venv/bin:$PATH bash scripts/gpu-check.sh OUTDIR gpu-wheels
# selects device cpu, smaller bandwidth sizes, C++ kernels and a full-depth step of 2 layers × 16 tokens;
# every other line is the same.
# Exit status: 0 when every step passed, 1 otherwise (each step still runs; its log comes back); 2 when
# refused before any step (one line on stderr, nothing written): an OUTDIR that is a file or cannot be
# created and written, carried wheels whose names or versions differ from scripts/gpu-wheels.txt, or
# no vendor/nano-vllm.
set -uo pipefail
cd "$(dirname "$0")/.."
OUTDIR="${1:?usage: scripts/gpu-check.sh OUTDIR [WHEELS_DIR]}"
WHEELS="${2:-gpu-wheels}"
PY="${PYTHON:-python3}"
REHEARSE="${GPU_CHECK_REHEARSE:-0}"
if [ "$REHEARSE" = 1 ]; then
  DEVICE=cpu; LANG_WANTED=cpp; TOKENS_BW=2048; REPEATS=5; CALLS=5; BENCH=(--shapes tiny --rounds 2)
  DEPTH_LAYERS=2; DEPTH_TOKENS=16
else
  DEVICE=cuda; LANG_WANTED=triton; TOKENS_BW=32768; REPEATS=20; CALLS=100; BENCH=(--rounds 20)
  DEPTH_LAYERS=28; DEPTH_TOKENS=512
fi

# ---- preflight: refuse at once, before any step, with one line (file, what is wrong, the fix); exit 2,
# nothing written. Without it an OUTDIR that cannot be made left OUTDIR empty and the log went to /.
refuse() { echo "gpu-check: error: $*" >&2; exit 2; }

# wheels_problem: the carried wheels must be exactly the name==version pins of scripts/gpu-wheels.txt
# (a wheel's file name is NAME-VERSION-…whl, names normalised as in PEP 503); prints what differs
wheels_problem() {
  [ -d "$WHEELS" ] || { echo "$WHEELS is not a folder of wheels; run 'make gpu-wheels' and carry gpu-wheels"; return; }
  local expected found
  expected=$(grep -v '^\s*#' scripts/gpu-wheels.txt | grep -v '^\s*$' | sed 's/\s*#.*//; s/==/ /' \
    | awk '{ n = tolower($1); gsub(/[-_.]+/, "-", n); print n "==" $2 }' | sort | tr '\n' ' ')
  found=$(for w in "$WHEELS"/*.whl; do [ -f "$w" ] && basename "$w"; done \
    | awk -F- '{ n = tolower($1); gsub(/[-_.]+/, "-", n); print n "==" $2 }' | sort | tr '\n' ' ')
  [ "$found" = "$expected" ] \
    || echo "$WHEELS holds [${found% }], expected exactly [${expected% }] (scripts/gpu-wheels.txt); run 'make gpu-wheels' again"
}

# outdir_problem: OUTDIR must be a folder this user can create and write; prints why not
outdir_problem() {
  if [ -L "$OUTDIR" ] && [ ! -d "$OUTDIR" ]; then echo "OUTDIR $OUTDIR is a dangling link; give a folder (the device tool's \$OUT)"; return; fi
  if [ -e "$OUTDIR" ] && [ ! -d "$OUTDIR" ]; then echo "OUTDIR $OUTDIR is a file, not a folder; give a folder (the device tool's \$OUT)"; return; fi
  local probe
  if [ -d "$OUTDIR" ]; then
    probe="$OUTDIR/.gpu-check-probe.$$"
    { : > "$probe"; } 2>/dev/null && rm -f "$probe" && return
    echo "OUTDIR $OUTDIR cannot be written; give a writable folder (the device tool's \$OUT)"; return
  fi
  local top="$OUTDIR"   # the first missing folder: removed again if OUTDIR cannot be completed
  while [ ! -e "$(dirname "$top")" ] && [ "$(dirname "$top")" != "$top" ]; do top="$(dirname "$top")"; done
  if mkdir -p "$OUTDIR" 2>/dev/null && { : > "$OUTDIR/.gpu-check-probe.$$"; } 2>/dev/null; then
    rm -f "$OUTDIR/.gpu-check-probe.$$"; return
  fi
  rm -rf "$top" 2>/dev/null
  echo "OUTDIR $OUTDIR cannot be created or written; give a writable folder (the device tool's \$OUT)"
}

test -f vendor/nano-vllm/nanovllm/models/qwen3.py \
  || refuse "vendor/nano-vllm/nanovllm/models/qwen3.py is missing: carry vendor/nano-vllm (run 'make site' or 'annotate vendor sync' first)"
why="$(wheels_problem)"; [ -z "$why" ] || refuse "$why"
why="$(outdir_problem)"; [ -z "$why" ] || refuse "$why"

WORK="$(mktemp -d)"; SITE="$WORK/site"; trap 'rm -rf "$WORK"' EXIT   # outside OUTDIR: not brought back
OUTDIR="$(cd "$OUTDIR" && pwd)" || refuse "OUTDIR $OUTDIR cannot be entered"; TRACE="$OUTDIR/$DEVICE"
WHEELS="$(cd "$WHEELS" && pwd)"
LOG="$OUTDIR/gpu-check.log"
FAILED=()

step() { printf '\n== %s (%s)\n' "$1" "$(date -u +%H:%M:%S)"; }
# run NAME SECONDS CMD...: one step under a timeout; a failure is recorded and the next step runs
run() {
  local name="$1" limit="$2"; shift 2
  timeout "$limit" "$@"; local rc=$?
  if [ "$rc" != 0 ]; then
    { [ "$rc" = 124 ] && echo "!! $name: timed out after ${limit}s" || echo "!! $name: exit $rc"; } >&2
    FAILED+=("$name")
  fi
  return 0
}

versions() {  # what is importable, read from package metadata (importing transformers 5 is not needed)
  "$PY" - <<'PY'
import importlib.metadata as md, os, sys
print("python", sys.version.split()[0], sys.executable)
print("prefix", sys.prefix, "| base prefix", sys.base_prefix, "| is a venv:", sys.prefix != sys.base_prefix)
print("PYTHONPATH", os.environ.get("PYTHONPATH", "(unset)"))
for name in ("torch", "triton", "transformers", "tokenizers", "huggingface-hub", "numpy", "tree-sitter",
             "tree-sitter-python", "pytest"):
    try:
        dist = md.distribution(name)
        print(f"  {name:<20} {dist.version:<14} {dist.locate_file('')}")
    except md.PackageNotFoundError:
        print(f"  {name:<20} (not installed)")
PY
}

main() {
step "interpreter, packages, CUDA and GPU (device $DEVICE$([ "$REHEARSE" = 1 ] && echo ', CPU rehearsal'))"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
versions
run cuda 20 "$PY" -c '
import sys, torch
print("torch", torch.__version__, "| CUDA", torch.version.cuda, "| available:", torch.cuda.is_available())
if torch.cuda.is_available():
    print("GPU", torch.cuda.get_device_name(0), torch.cuda.get_device_capability(0))
sys.exit(0 if torch.cuda.is_available() or sys.argv[1] == "cpu" else 1)' "$DEVICE"

step "carried wheels from $WHEELS → $SITE (--no-index --no-deps --target; names and versions checked before step 1)"
run install 40 "$PY" -m pip install --quiet --no-index --no-deps --no-compile --no-cache-dir \
  --disable-pip-version-check --target "$SITE" "$WHEELS"/*.whl
export PYTHONPATH="$SITE:$PWD${PYTHONPATH:+:$PYTHONPATH}"
versions
run imports 20 "$PY" -c '
import transformers, tokenizers, huggingface_hub, torch, triton
print("imported: transformers", transformers.__version__, "| tokenizers", tokenizers.__version__,
      "| huggingface-hub", huggingface_hub.__version__, "| torch", torch.__version__, "| triton", triton.__version__)
assert transformers.__version__.startswith("4."), "the carried transformers < 5 is not the one imported"'

step "$DEVICE trace (qwen3-0.6b shape, 4 layers, 32 tokens, bfloat16)"
# its report quotes vendored lines: kept beside SITE (not brought back), only its first line is logged
run trace 90 "$PY" -m annotate trace --device "$DEVICE" --preset qwen3-0.6b --layers 4 --tokens 32 \
  --dtype bfloat16 --out "$TRACE" --force > "$SITE.trace-report.txt"
head -n 1 "$SITE.trace-report.txt"

step "kernel source captured ($LANG_WANTED) → $TRACE/kernels.txt"
run kernels 15 env TRACE="$TRACE" LANG_WANTED="$LANG_WANTED" "$PY" - <<'PY'
import os
from pathlib import Path
from annotate.trace.format.store import load_trace
trace = Path(os.environ["TRACE"])
t = load_trace(trace)
blocks = []
for k in t.kernels:
    print(f"{k['function']:<26} {','.join(k['languages']):<8} {len(k['kernels'])} kernels, {len(k['code'])} chars")
    for kern in k["kernels"]:
        blocks.append(f"# ==== {k['function']} ({k['file']}:{k['line']}) kernel {kern['name']} [{kern['language']}]\n"
                      f"{kern['source']}\n")
(trace / "kernels.txt").write_text("\n".join(blocks), encoding="utf-8")
want = os.environ["LANG_WANTED"]
assert any(want in k["languages"] for k in t.kernels), f"no {want} kernel captured"
assert t.meta["compiled"]["ran_compiled"], "a compiled function ran its Python body"
print("compiled paths ran compiled:", t.meta["compiled"]["ran_compiled"])
PY

step "fused add_rms_forward vs eager body vs copy of the same bytes → $TRACE/bandwidth.json"
run bandwidth 50 "$PY" -m annotate.trace.reports.bandwidth --device "$DEVICE" --dtype bfloat16 --tokens "$TOKENS_BW" \
  --hidden 1024 --repeats "$REPEATS" --calls "$CALLS" --out "$TRACE/bandwidth.json"

step "GPU tests (pytest -m gpu; they skip without CUDA)"
run gpu-tests 50 "$PY" -m pytest -q -p no:cacheprovider -m gpu tests/test_cli_trace.py

step "the recorder's cost on $DEVICE (bench/bench_trace.py: ratios to a plain forward) → $TRACE/bench-trace.json"
run bench 60 "$PY" bench/bench_trace.py --device "$DEVICE" --no-identify "${BENCH[@]}" --out "$TRACE/bench-trace.json"

step "full depth: $DEVICE trace of the qwen3-0.6b shape, $DEPTH_LAYERS layers × $DEPTH_TOKENS tokens → $OUTDIR/full-depth/"
# traced and measured in one process: max_memory_allocated() is this process's peak; the trace's folder
# is written beside SITE (not brought back) and only its trace.json is copied into OUTDIR
mkdir -p "$OUTDIR/full-depth"
run full-depth 135 env DEPTH_OUT="$OUTDIR/full-depth" DEPTH_WORK="$WORK/full-depth" DEVICE="$DEVICE" \
  DEPTH_LAYERS="$DEPTH_LAYERS" DEPTH_TOKENS="$DEPTH_TOKENS" "$PY" - <<'PY'
import collections, contextlib, json, os, shutil, time
from pathlib import Path
import torch
from annotate.cli import main
from annotate.trace.model import budget, runtime
from annotate.trace.model.options import PRESETS
out, work, device = Path(os.environ["DEPTH_OUT"]), Path(os.environ["DEPTH_WORK"]), os.environ["DEVICE"]
layers, tokens = int(os.environ["DEPTH_LAYERS"]), int(os.environ["DEPTH_TOKENS"])
report = work.parent / "full-depth-report.txt"   # it quotes vendored lines: kept beside SITE, first line logged
start = time.perf_counter()
with open(report, "w", encoding="utf-8") as sink, contextlib.redirect_stdout(sink):
    rc = main(["trace", "--device", device, "--preset", "qwen3-0.6b", "--layers", str(layers), "--tokens", str(tokens),
               "--dtype", "bfloat16", "--out", str(work), "--force", "--quiet"])
wall = time.perf_counter() - start
print(report.read_text(encoding="utf-8").partition("\n")[0])
cuda = device == "cuda"
peak = torch.cuda.max_memory_allocated() if cuda else None
reserved = torch.cuda.max_memory_reserved() if cuda else None
trace = json.loads((work / "trace.json").read_text(encoding="utf-8")) if rc == 0 else None
if trace is not None:
    shutil.copyfile(work / "trace.json", out / "trace.json")
statuses = collections.Counter(v["identity"]["status"] for r in (trace or {}).get("records", [])
                               for v in r["vars"] if v.get("identity"))
config = runtime.preset_config(PRESETS["qwen3-0.6b"], layers, "bfloat16")
predicted = budget.estimate(config, layers, tokens, "bfloat16", device)
gib = lambda n: None if n is None else n / budget.GIB
scale = {"rc": rc, "device": device, "device_name": torch.cuda.get_device_name(0) if cuda else "cpu",
         "torch": torch.__version__, "layers": layers, "tokens": tokens, "dtype": "bfloat16", "wall_s": round(wall, 2),
         "identify_on_device": budget.CURRENT_LAYOUT.identify_on_device,
         "hf_lines_on_device": budget.CURRENT_LAYOUT.hf_lines_on_device,
         "max_allocated_gib": gib(peak), "max_reserved_gib": gib(reserved),
         "predicted_gib": gib(predicted.device_memory),
         "predicted_stages_gib": {k: gib(v) for k, v in predicted.stages().items()},
         "timings": (trace or {}).get("meta", {}).get("timings"), "statuses": dict(statuses)}
(out / "scale.json").write_text(json.dumps(scale, indent=1) + "\n", encoding="utf-8")
print(json.dumps({k: scale[k] for k in ("rc", "wall_s", "max_allocated_gib", "predicted_gib", "statuses")}))
print("stage times (s):", scale["timings"])
raise SystemExit(rc)
PY

step "what comes back from $OUTDIR (at most 8 files, 2 folders deep)"
(cd "$OUTDIR" && find . -type f | sort | while read -r f; do printf '  %8d  %s\n' "$(stat -c %s "$f")" "$f"; done)
n=$(find "$OUTDIR" -type f | wc -l); deep=$(find "$OUTDIR" -mindepth 4 -type f | wc -l)
[ "$n" -le 8 ] && [ "$deep" = 0 ] || { echo "!! $n files ($deep too deep) under $OUTDIR"; FAILED+=(out-limits); }
if [ "${#FAILED[@]}" = 0 ]; then
  step "done: every step passed"; return 0
fi
step "done with failures: ${FAILED[*]}"; return 1
}

main 2>&1 | tee "$LOG"
exit "${PIPESTATUS[0]}"
