#!/usr/bin/env bash
# The cuDNN frontend on a GPU machine, one command (issue 13), within about two minutes:
#
#     SOL_BUILD=<dir with libsol.so and sol> OUT=<log dir> scripts/gpu/cudnn_trace.sh
#
# Runs scripts/gpu/cudnn_cnn.py (pip PyTorch on CUDA, cuDNN on) without and with libsol
# (SOL_TRACE=1) and prints PASS/FAIL lines:
#   - the losses are the same with libsol as without;
#   - the trace has cuDNN convolution rows (forward, backward data, backward weights) with their
#     problems, device time, and stacks reaching the script;
#   - cudnnBackendExecute calls traced = those cuDNN's own API log counts (CUDNN_LOGLEVEL_DBG=3);
#   - every convolution problem of the GPU trace is one the CPU trace of the same network through
#     oneDNN has (fixtures/cnn_cpu_onednn.summary.json, Debian's PyTorch), and `sol diff
#     --across-apis` reads both.
# Without a GPU (or without PyTorch with CUDA) it says SKIP and exits 0. Exit status 1 on a FAIL.
set -u
here=$(cd "$(dirname "$0")" && pwd)
: "${SOL_BUILD:?SOL_BUILD must name the directory with libsol.so and sol}"
: "${OUT:?OUT must name a directory for the logs}"
mkdir -p "$OUT"
# The script's own settings, not the programs': libsol warns about SOL_ variables it does not know.
export -n SOL_BUILD OUT
py=python3
[ -x /opt/torch/.venv/bin/python3 ] && py=/opt/torch/.venv/bin/python3
status=0
pass() { echo "PASS $*"; }
fail() { echo "FAIL $*"; status=1; }

if ! timeout 60 "$py" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  echo "SKIP no GPU, or no PyTorch with CUDA ($py)"
  exit 0
fi

timeout 60 "$py" "$here/cudnn_cnn.py" cuda >"$OUT/plain.out" 2>"$OUT/plain.err" || fail "the CNN without libsol (see $OUT/plain.err)"
rm -rf "$OUT/trace" "$OUT/cudnn_api.log"
SOL_TRACE=1 SOL_TRACE_DIR="$OUT/trace" SOL_LOG=info CUDNN_LOGLEVEL_DBG=3 CUDNN_LOGDEST_DBG="$OUT/cudnn_api.log" \
  LD_PRELOAD="$SOL_BUILD/libsol.so" timeout 90 "$py" "$here/cudnn_cnn.py" cuda >"$OUT/traced.out" 2>"$OUT/traced.err" \
  || fail "the CNN under libsol (see $OUT/traced.err)"
if cmp -s "$OUT/plain.out" "$OUT/traced.out" && [ -s "$OUT/plain.out" ]; then
  pass "losses unchanged by libsol: $(tr '\n' ' ' <"$OUT/plain.out")"
else
  fail "losses differ: without $(tr '\n' ' ' <"$OUT/plain.out"), with $(tr '\n' ' ' <"$OUT/traced.out")"
fi

summary=$(ls "$OUT"/trace/run-*/*.summary.json 2>/dev/null | head -1)
if [ -z "$summary" ]; then
  fail "no trace summary in $OUT/trace"
  exit 1
fi
"$py" - "$summary" "$OUT/cudnn_api.log" "$here/fixtures/cnn_cpu_onednn.summary.json" <<'PY' || status=1
import json, re, sys
summary, api_log, cpu = sys.argv[1:4]
base = summary[:-len(".summary.json")]
ok = True
def check(cond, what):
    global ok
    print(("PASS " if cond else "FAIL ") + what)
    ok &= bool(cond)
s = json.load(open(summary))
ops = [o for o in s["ops"] if o["api"] == "cudnn"]
convs = [o for o in ops if o["op"] == "convolution"]
props = {o["shape"].split()[0] for o in convs}
check(convs, "cuDNN convolution rows: %d signatures" % len(convs))
check({"prop=forward_training", "prop=backward_data", "prop=backward_weights"} <= props, "convolution passes: %s" % sorted(props))
for o in convs:
    print("     %6d calls %10.3f ms device  %s" % (o["calls"], o.get("device_ns", 0) / 1e6, o["shape"]))
check(convs and all(o.get("device_calls") == o["calls"] and o.get("device_ns", 0) > 0 for o in convs),
      "device time on every convolution call")
trace = open(base + ".trace.json").read()
device = [json.loads(l[1:]) for l in trace.splitlines() if l.startswith(',{') and '"cat":"device"' in l]
tracks = {json.loads(l[1:])["tid"]: json.loads(l[1:])["args"]["name"] for l in trace.splitlines()
          if l.startswith(',{"ph":"M"') and '"thread_name"' in l}
on_tracks = {e["tid"] for e in device if e["name"] == "cudnnBackendExecute"}
check(on_tracks and all(tracks.get(t, "").startswith("cuda device ") for t in on_tracks),
      "trace.json: %d device events of cudnnBackendExecute on %s"
      % (sum(e["name"] == "cudnnBackendExecute" for e in device), sorted(tracks.get(t, "?") for t in on_tracks)))
check("\nDevice time: " in open(base + ".summary.txt").read(), "summary.txt has the Device time table")
sites = [st for st in s["sites"] if st["symbol"] == "cudnnBackendExecute"]
check(any(any("cudnn_cnn.py" in f for f in st["frames"]) for st in sites), "cudnnBackendExecute stacks reach cudnn_cnn.py")
traced = sum(o["calls"] for o in ops if o["symbol"] == "cudnnBackendExecute")
try:
    text = open(api_log, errors="replace").read()
except OSError:
    text = ""
# cuDNN logs a call more than once: an entry record with the arguments, a return record with the
# status ("function cudnnBackendExecute() called:\ni!     status: ..."), and warning records
# (W!) from inside (cudnnBatchNormalizationBackwardEx: "!canRunSemiPersist"). Every compute entry
# point takes the handle first, so its entry record, one per call, is the I! record whose first
# argument is the handle.
def calls_logged(name):
    return len(re.findall(r"^I! CuDNN \([^)]*\) function %s\(\) called:\ni!     handle:" % re.escape(name), text, re.M))
counted = calls_logged("cudnnBackendExecute")
if not text:
    print("SKIP independent count: cuDNN wrote no API log")
else:
    check(counted == traced, "cudnnBackendExecute: %d traced, %d in cuDNN's API log" % (traced, counted))
    for name in sorted({o["symbol"] for o in ops if o["op"] != "cudnn_api" and o["symbol"] != "cudnnBackendExecute"}):
        n = sum(o["calls"] for o in ops if o["symbol"] == name)
        m = calls_logged(name)
        check(n == m, "%s: %d traced, %d in cuDNN's API log" % (name, n, m))
problem = lambda shape: (shape.split()[0], [t for t in shape.split() if "=" not in t][0])
cpu_convs = {problem(o["shape"]) for o in json.load(open(cpu))["ops"] if o["op"] == "convolution"}
gpu_convs = {problem(o["shape"]) for o in convs}
check(gpu_convs and gpu_convs <= cpu_convs, "GPU convolution problems all in the oneDNN CPU trace: %s"
      % sorted(gpu_convs - cpu_convs or gpu_convs))
sys.exit(0 if ok else 1)
PY
if "$SOL_BUILD/sol" diff --across-apis --format json "$here/fixtures/cnn_cpu_onednn.summary.json" "$summary" \
    >"$OUT/diff.json" 2>"$OUT/diff.err"; then
  pass "sol diff CPU (oneDNN) vs GPU (cuDNN): $OUT/diff.json"
else
  fail "sol diff (see $OUT/diff.err)"
fi
exit $status
