#!/usr/bin/env bash
# The main job: installs what is missing, builds libsol and the sol command (no tests: that is
# scripts/test.sh), and trains SOL's example model (examples/train.py, PyTorch) under libsol, next
# to the same run without it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh --demo
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

# A program whose libblas.so.3 is the slow reference BLAS: libsol sends its BLAS work to a fast
# backend without a rebuild.
REF=/usr/lib/x86_64-linux-gnu/blas
if [ -e "$REF/libblas.so.3" ]; then
  echo
  echo "== linked to the reference BLAS, without libsol"
  LD_LIBRARY_PATH=$REF $PY examples/train.py --epochs 2 | tail -1
  echo "== linked to the reference BLAS, under libsol (backends chosen per call)"
  LD_LIBRARY_PATH=$REF "$SOL" run -- $PY examples/train.py --epochs 2 | tail -1
fi

# The survey view: which primitives the training loop reaches, with shapes and times.
TRACE_DIR=/tmp/sol-demo-trace
rm -rf "$TRACE_DIR"
echo
echo "== traced:  sol run --trace --trace-dir $TRACE_DIR -- python3 examples/train.py --epochs 1"
"$SOL" run --trace --trace-dir "$TRACE_DIR" -- $PY examples/train.py --epochs 1 | tail -1
"$SOL" report "$TRACE_DIR" --top 12
echo "(trace files in $TRACE_DIR/run-*: open sol-*.trace.json in Perfetto or chrome://tracing)"
