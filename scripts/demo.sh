#!/usr/bin/env bash
# The main job: installs what is missing, builds, and trains SOL's example model (examples/train.py,
# PyTorch) under libsol, next to the same run without it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
BUILD_DIR=${BUILD_DIR:-build}
SOL="$BUILD_DIR/sol"
PY=/usr/bin/python3  # Debian's Python, which has torch

echo
echo "== without libsol"
$PY examples/train.py | tee /tmp/sol-demo-native.txt
echo
echo "== under libsol:  sol run -- python3 examples/train.py"
"$SOL" run -- $PY examples/train.py | tee /tmp/sol-demo-sol.txt
echo
if [ "$(tail -1 /tmp/sol-demo-native.txt | cut -d' ' -f2-3)" = "$(tail -1 /tmp/sol-demo-sol.txt | cut -d' ' -f2-3)" ]; then
  echo "demo: same loss and accuracy with and without libsol"
else
  echo "demo: results differ" >&2
  exit 1
fi
