#!/usr/bin/env bash
# Print the path of a working Python interpreter of version X.Y (first argument), or nothing.
# Looks on PATH (pythonX.Y), then in pyenv's versions (a pyenv shim of a version that is not active
# fails when run, so each candidate is run once). Used by `make py312`.
set -uo pipefail
want="${1:?usage: scripts/find-python.sh X.Y}"
candidates=("python$want")
if command -v pyenv >/dev/null 2>&1; then
  for p in "$(pyenv root)"/versions/"$want".*/bin/python"$want"; do candidates+=("$p"); done
fi
for p in "${candidates[@]}"; do
  if "$p" -c "import sys; sys.exit(sys.version_info[:2] != tuple(map(int, '$want'.split('.'))))" >/dev/null 2>&1; then
    command -v "$p"
    exit 0
  fi
done
