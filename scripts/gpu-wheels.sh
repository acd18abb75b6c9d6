#!/usr/bin/env bash
# Download the exact wheels of scripts/gpu-wheels.txt for the GPU image into DEST (no deps: the
# list is complete). Usage: scripts/gpu-wheels.sh DEST [PYTHON_VERSION]   (default 3.12, the image's)
# `make gpu-wheels` runs it into gpu-wheels/ (git-ignored); the CPU rehearsal runs it for 3.11.
set -euo pipefail
cd "$(dirname "$0")/.."
DEST="${1:?usage: scripts/gpu-wheels.sh DEST [PYTHON_VERSION]}"
PYVER="${2:-3.12}"
PY="${PYTHON:-.venv/bin/python}"
mkdir -p "$DEST"
"$PY" -m pip download --quiet --no-deps --only-binary=:all: --dest "$DEST" \
  --python-version "$PYVER" --implementation cp --abi "cp${PYVER/./}" --abi abi3 --abi none \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform any -r scripts/gpu-wheels.txt   # pip skips its comments and blank lines
ls -1 "$DEST"/*.whl
