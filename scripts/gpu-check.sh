#!/usr/bin/env bash
# GPU check for `annotate trace` (about 5 minutes on one H200). Writes, under traces/:
#   traces/cuda/                  CUDA trace: qwen3-0.6b shape, 4 layers, 32 tokens, bfloat16,
#                                 real Triton kernels (their source is in trace.json → "kernels")
#   traces/cuda/bandwidth.json    fused add_rms_forward vs its eager body vs a device copy of the
#                                 same bytes (achieved bandwidth as a fraction of copy bandwidth)
#   traces/cuda-gpu-check.log     everything this script printed
#
# The GPU machine has no network and ships torch 2.11 / triton 3.6 / transformers 5.x. nano-vllm
# needs transformers < 5, so bring wheels with you. Prepare them where there is network, for the
# GPU image's Python (check with `python3 -V` there; 3.12 below):
#
#   pip download --dest wheels --only-binary=:all: --python-version 3.12 \
#       --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
#       'transformers>=4.51,<5' 'tokenizers<0.23' 'huggingface-hub<1.0' safetensors xxhash pyyaml pytest
#
# and carry wheels/ plus the materialised vendor/nano-vllm/ (git-ignored) to the GPU machine.
# Usage:  scripts/gpu-check.sh [WHEELS_DIR]        (default: wheels)
#         scripts/gpu-check.sh --rehearse          every step on the CPU, with this checkout's Python
#                                                  (PYTHON, default .venv/bin/python), into GPU_CHECK_OUT
#                                                  (default a temp folder): run it before spending
#                                                  device time; tests/test_gpu_check.py does
set -euo pipefail
cd "$(dirname "$0")/.."
REHEARSE=0
if [ "${1:-}" = "--rehearse" ]; then REHEARSE=1; shift; fi
WHEELS="${1:-wheels}"
ENV_DIR="${GPU_ENV:-.venv-gpu}"
if [ "$REHEARSE" = 1 ]; then
  DEVICE=cpu; LANG_WANTED=cpp; PY="${PYTHON:-.venv/bin/python}"
  OUT="${GPU_CHECK_OUT:-$(mktemp -d)/cuda}"; TOKENS_BW=4096; ITERS=10
else
  DEVICE=cuda; LANG_WANTED=triton; PY="${PYTHON:-python3}"
  OUT="${GPU_CHECK_OUT:-traces/cuda}"; TOKENS_BW=32768; ITERS=100
fi
mkdir -p "$(dirname "$OUT")"
LOG="$(dirname "$OUT")/$(basename "$OUT")-gpu-check.log"
exec > >(tee "$LOG") 2>&1

step() { printf '\n== %s (%s)\n' "$1" "$(date -u +%H:%M:%S)"; }

step "device ($DEVICE$([ "$REHEARSE" = 1 ] && echo ', rehearsal'))"
test -f vendor/nano-vllm/nanovllm/models/qwen3.py \
  || { echo "vendor/nano-vllm is missing: run 'annotate vendor sync' before carrying the tree over"; exit 1; }
if [ "$REHEARSE" = 0 ]; then
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
  "$PY" -c 'import torch, sys; print("torch", torch.__version__, "cuda", torch.version.cuda); sys.exit(0 if torch.cuda.is_available() else 1)' \
    || { echo "CUDA is not available to $PY; nothing to check"; exit 1; }

  step "environment: image torch/triton + transformers<5 from $WHEELS (offline)"
  if [ ! -x "$ENV_DIR/bin/python" ]; then
    "$PY" -m venv --system-site-packages "$ENV_DIR"
  fi
  test -d "$WHEELS" || { echo "no wheels folder $WHEELS (see the header of this script)"; exit 1; }
  "$ENV_DIR/bin/python" -m pip install --quiet --no-index --find-links "$WHEELS" \
    'transformers>=4.51,<5' safetensors xxhash pyyaml
  "$ENV_DIR/bin/python" -m pip install --quiet --no-index --find-links "$WHEELS" pytest || echo "(pytest not in $WHEELS: GPU test skipped)"
  PY="$ENV_DIR/bin/python"
fi
RUN=(env PYTHONPATH="$PWD" "$PY")
"${RUN[@]}" -c 'import torch, triton, transformers; print("torch", torch.__version__, "triton", triton.__version__, "transformers", transformers.__version__)'

step "$DEVICE trace (qwen3-0.6b shape, 4 layers, 32 tokens, bfloat16)"
timeout 300 "${RUN[@]}" -m annotate trace --device "$DEVICE" --preset qwen3-0.6b --layers 4 --tokens 32 \
  --dtype bfloat16 --out "$OUT" --force

step "kernel source captured ($LANG_WANTED)"
OUT="$OUT" LANG_WANTED="$LANG_WANTED" "${RUN[@]}" - <<'PY'
import os
from annotate.trace.store import load_trace
t = load_trace(os.environ["OUT"])
for k in t.kernels:
    print(f"{k['function']:<26} {','.join(k['languages']):<8} {len(k['kernels'])} kernels, {len(k['code'])} chars")
want = os.environ["LANG_WANTED"]
assert any(want in k["languages"] for k in t.kernels), f"no {want} kernel captured"
assert t.meta["compiled"]["ran_compiled"], "a compiled function ran its Python body"
print("compiled paths ran compiled:", t.meta["compiled"]["ran_compiled"])
PY

step "fused add_rms_forward vs eager body vs device copy"
timeout 180 "${RUN[@]}" -m annotate.trace.bandwidth --device "$DEVICE" --dtype bfloat16 --tokens "$TOKENS_BW" \
  --hidden 1024 --iters "$ITERS" --out "$OUT/bandwidth.json"

step "GPU tests"
if [ "$REHEARSE" = 1 ]; then
  echo "(rehearsal: the GPU tests skip without CUDA; not run)"
elif "$PY" -c 'import pytest' 2>/dev/null; then
  timeout 300 "${RUN[@]}" -m pytest -q -m gpu tests/test_cli_trace.py || echo "GPU tests failed (see above)"
fi

step "done: $OUT (trace.json, bandwidth.json), $LOG"
