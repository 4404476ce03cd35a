#!/usr/bin/env bash
# The cuBLAS frontend on a GPU: SOL_TRACE=1 on pip PyTorch's CUDA training of a small CNN and a
# transformer block (cublas_models.py), checked for
#   outputs  the five trace outputs of the Python process
#   rows     cuBLAS / cuBLASLt GEMM rows with shapes, and call sites with Python frames
#   device   device time measured (CUDA events) for traced GEMMs
#   report   `sol report` reads the trace and shows the rows
#   count    traced GEMM calls equal to cuBLAS's and cuBLASLt's own API logs (count_cublas_log.py)
#   loss     every loss printed identical without libsol, under libsol tracing, and (transformer)
#            under libsol in passthrough
#
#   SOL_BUILD=<dir with libsol.so and sol> OUT=<log dir> scripts/gpu/cublas_trace.sh
#
# Run from the repository root. One PASS/FAIL line per check and model; "SKIP" and exit 0 where
# there is no PyTorch with a CUDA device. Exit status 1 when any check failed. About a minute.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
: "${SOL_BUILD:?SOL_BUILD must name the build directory (libsol.so, sol)}"
: "${OUT:?OUT must name a directory for the logs}"
mkdir -p "$OUT"
# The script's own settings, not the programs': libsol warns about SOL_ variables it does not know,
# which would change the output the passthrough run is compared on.
export -n SOL_BUILD OUT
LIBSOL=$(cd "$SOL_BUILD" && pwd)/libsol.so
SOL=$(cd "$SOL_BUILD" && pwd)/sol
HERE=$ROOT/scripts/gpu

PY=${PYTHON:-}
if [ -z "$PY" ]; then
  for c in /opt/torch/.venv/bin/python3 python3 /usr/bin/python3; do
    if command -v "$c" >/dev/null 2>&1 && "$c" -c 'import torch' >/dev/null 2>&1; then PY=$c; break; fi
  done
fi
if [ -z "$PY" ]; then
  echo "SKIP: no Python with PyTorch"
  exit 0
fi
if ! "$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' >/dev/null 2>&1; then
  echo "SKIP: $PY: torch.cuda.is_available() is false (no CUDA device)"
  exit 0
fi
for f in "$LIBSOL" "$SOL"; do
  if [ ! -e "$f" ]; then
    echo "FAIL setup: $f not found"
    exit 1
  fi
done
echo "python: $PY ($("$PY" -c 'import torch; print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name())'))"

failed=0
pass() { echo "PASS $*"; }
fail() { echo "FAIL $*"; failed=1; }
export CUBLAS_WORKSPACE_CONFIG=:4096:8

for model in cnn transformer; do
  plain=$OUT/$model.plain.txt
  traced=$OUT/$model.trace.txt
  tdir=$OUT/trace-$model
  rm -rf "$tdir"
  if ! timeout 60 "$PY" "$HERE/cublas_models.py" "$model" >"$plain" 2>"$OUT/$model.plain.err"; then
    fail "run $model: without libsol it failed (see $OUT/$model.plain.err)"
    continue
  fi
  if ! env SOL_TRACE=1 SOL_TRACE_DIR="$tdir" \
      CUBLAS_LOGINFO_DBG=1 CUBLAS_LOGDEST_DBG="$OUT/$model.cublas.log" \
      CUBLASLT_LOG_LEVEL=5 CUBLASLT_LOG_FILE="$OUT/$model.cublaslt.log" \
      LD_PRELOAD="$LIBSOL" timeout 90 "$PY" "$HERE/cublas_models.py" "$model" >"$traced" 2>"$OUT/$model.trace.err"; then
    fail "run $model: under SOL_TRACE=1 it failed (see $OUT/$model.trace.err)"
    continue
  fi
  if diff -q "$plain" "$traced" >/dev/null; then pass "loss $model: $(tail -n 1 "$plain")"
  else fail "loss $model: differs under libsol tracing (diff $plain $traced)"; fi

  # The Python process's files: the one whose summary has cuBLAS rows.
  summary=$(grep -l '"api": "cublas' "$tdir"/run-*/sol-*.summary.json 2>/dev/null | head -n 1)
  if [ -z "$summary" ]; then
    fail "outputs $model: no summary.json with cuBLAS rows in $tdir"
    continue
  fi
  base=${summary%.summary.json}
  missing=""
  for ext in trace.json summary.json summary.txt folded graph.dot; do
    [ -s "$base.$ext" ] || missing="$missing $ext"
  done
  if [ -z "$missing" ]; then pass "outputs $model: $(basename "$base").{trace.json,summary.json,summary.txt,folded,graph.dot}"
  else fail "outputs $model: missing or empty:$missing"; fi

  "$PY" - "$summary" "$base.trace.json" <<'PYEOF'
import json, sys
s = json.load(open(sys.argv[1]))
rows = [o for o in s["ops"] if o["api"] in ("cublas", "cublaslt") and o["op"] in ("gemm", "gemv")]
shaped = [o for o in rows if o["shape"].startswith("m=")]
gemm_syms = {o["symbol"] for o in rows}
sites = [x for x in s["sites"] if x["symbol"] in gemm_syms and any(".py:" in f for f in x["frames"])]
timed = [o for o in rows if o.get("device_calls", 0) > 0]
ok = rows and len(shaped) == len(rows) and sites
print(("PASS" if ok else "FAIL") + " rows: %d cuBLAS/cuBLASLt GEMM signatures (%s), %d with shapes, %d call sites with Python frames"
      % (len(rows), ", ".join(sorted(gemm_syms)), len(shaped), len(sites)))
for o in rows[:6]:
    print("    %-26s %-5s %s" % (o["symbol"], o["dtype"], o["shape"]))
dev_calls = sum(o.get("device_calls", 0) for o in rows)
calls = sum(o["calls"] for o in rows)
print(("PASS" if timed else "FAIL") + " device: %d of %d GEMM calls timed on the device, %.3f ms in all"
      % (dev_calls, calls, sum(o.get("device_ns", 0) for o in rows) / 1e6))
trace = open(sys.argv[2]).read()
events = '"cat":"device"' in trace and '"name":"cuda device ' in trace
print(("PASS" if events else "FAIL") + " device events: trace.json has the device's side of the calls, on tracks per stream")
table = "\nDevice time: " in open(sys.argv[2][:-len(".trace.json")] + ".summary.txt").read()
print(("PASS" if table else "FAIL") + " device table: summary.txt has the Device time table")
sys.exit(0 if ok and timed and events and table else 1)
PYEOF
  [ $? -eq 0 ] || failed=1

  if "$SOL" report "$tdir" >"$OUT/$model.report.txt" 2>&1 && grep -q cublas "$OUT/$model.report.txt"; then
    pass "report $model: sol report shows cuBLAS rows"
  else
    fail "report $model: sol report failed or shows no cuBLAS row ($OUT/$model.report.txt)"
  fi

  "$PY" "$HERE/count_cublas_log.py" "$OUT/$model.cublas.log" "$OUT/$model.cublaslt.log" "$summary" \
    | sed "s/^\(PASS\|FAIL\) count/\1 count $model/" | tee "$OUT/$model.count.txt"
  grep -q '^PASS' "$OUT/$model.count.txt" || failed=1
done

# Passthrough (libsol loaded, nothing traced): the same losses.
if env LD_PRELOAD="$LIBSOL" timeout 60 "$PY" "$HERE/cublas_models.py" transformer >"$OUT/transformer.passthrough.txt" 2>&1 &&
    diff -q "$OUT/transformer.plain.txt" "$OUT/transformer.passthrough.txt" >/dev/null; then
  pass "loss transformer passthrough: identical"
else
  fail "loss transformer passthrough: differs or failed ($OUT/transformer.passthrough.txt)"
fi

exit $failed
