#!/bin/bash
# auto on the GPU machine's own CPU: an AVX-512 Xeon that Debian's OpenBLAS 0.3.21 does not
# recognise (it runs its Prescott kernels there), the case auto measures for. Prints the CPU,
# `sol backends` (the below-par warning, the openblas backend's kernels) and bench/auto_sweep.py
# over a few sizes, with gpu-carry/'s OpenBLAS as the native library and its oneDNN; the sweep's
# table goes to stdout and $OUT/sweep.txt. First, the first call of three auto processes against
# native's ($OUT/first_call.txt): the CUDA device starts on a thread of its own, so no call waits
# for it (the first process, a second of calls, also measures the device's costs, which the next
# two read from the profile directory; each one's debug log is $OUT/first<i>.log, with the time
# each backend took to set up). Then the race and the trial of a 256^3 NN SGEMM in AUTO_TRIALS
# (6) fresh processes ($OUT/trials.txt). Then the PyTorch MLP's GEMMs from C (bench/auto_mlp.py --c-only:
# bench_mlp_gemms natively on the misdetected library, natively with the kernels `sol backends`
# names, and under auto; $OUT/mlp_gemms.txt; each class's race and trial in two processes,
# $OUT/mlp_trials.txt; AUTO_MLP=0 leaves both out), after `sol tune --quick`
# and its profile ($OUT/tune.txt; AUTO_TUNE=0 leaves it out), then the sweep. Not among
# run_all.sh's default parts (PARTS=auto_cpu).
#
# Run from the repository root:
#   SOL_BUILD=<dir with libsol.so, sol, bench/bench_gemm> OUT=<log dir> [AUTO_SIZES=64,256,1024]
#   [AUTO_TRANS=NN,TN] [AUTO_TYPES=s,d] [AUTO_TRIALS=6] [AUTO_TUNE=0] [AUTO_MLP=0]
#   [AUTO_SWEEP=0: no sweep, about 50 s]
#   scripts/gpu/auto_cpu.sh
set -u
: "${SOL_BUILD:?set SOL_BUILD to the build directory}" "${OUT:?set OUT to a directory for logs}"
root=$(pwd)
# shellcheck source=scripts/gpu/common.sh
. "$root/scripts/gpu/common.sh"
build=$(cd "$SOL_BUILD" && pwd)
export -n SOL_BUILD  # libsol warns of SOL_ variables it does not know
mkdir -p "$OUT"
out=$(cd "$OUT" && pwd)
[ -x "$build/bench/bench_gemm" ] || { echo "FAIL: $build/bench/bench_gemm is missing"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if carry_open "$root/gpu-carry" "$tmp/carry"; then
  export LD_LIBRARY_PATH="$carry_dir/openblas:$carry_dir/dnnl:$carry_dir/syslib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
{
  grep -m1 '^model name' /proc/cpuinfo
  echo "cpus: $(nproc); avx512f: $(grep -qw avx512f /proc/cpuinfo && echo yes || echo no)"
  echo "OpenCL ICDs: $(ls /etc/OpenCL/vendors 2>/dev/null | tr '\n' ' ')"
} | tee "$out/cpu.txt"
"$build/sol" backends 2>&1 | tee "$out/backends.txt" | grep -E 'native|openblas|onednn|sol:' | cut -c1-200
# bench_gemm's third column: the first call's seconds.
{
  echo "first call, seconds: native, then three auto processes sharing a fresh profile directory"
  echo "native $("$build/bench/bench_gemm" s 256 0.05 TN | cut -d' ' -f3)"
  mkdir -p "$tmp/cache"
  for i in 1 2 3; do
    echo "auto $(XDG_CACHE_HOME="$tmp/cache" SOL_LOG=debug LD_PRELOAD="$build/libsol.so" \
      "$build/bench/bench_gemm" s 256 1 TN 2>"$tmp/first$i.log" | cut -d' ' -f3)"
    grep -E 'cuda: (device started|device costs from|measured)|accelerator is still starting|set up in|calls:' \
      "$tmp/first$i.log" | cut -c1-200
    cp "$tmp/first$i.log" "$out/first$i.log"
  done
} 2>&1 | tee "$out/first_call.txt"
# The trials of one class in fresh processes: what the race measured and what the trial in use
# found (the 256^3 NN SGEMM is the class whose sweep cell fell to 0.31 of the fastest there).
if [ "${AUTO_TRIALS:-6}" != 0 ]; then
  {
    echo "bench_gemm s 256 1 NN under auto, each process with a fresh profile: GFLOP/s, then its race and trial"
    for i in $(seq "${AUTO_TRIALS:-6}"); do
      rm -rf "$tmp/trials"
      echo "process $i: $(XDG_CACHE_HOME="$tmp/trials" SOL_LOG=debug LD_PRELOAD="$build/libsol.so" \
        "$build/bench/bench_gemm" s 256 1 NN 2>"$tmp/trial.log" | cut -d' ' -f2)"
      grep -E '^sol: (measured|tried) ' "$tmp/trial.log" | cut -c1-260
    done
  } 2>&1 | tee "$out/trials.txt"
fi
# `sol tune --quick` from a fresh profile: each shape's class measured alone and tried in use in
# a process of its own, then the profile ($OUT/tune.txt; AUTO_TUNE=0 leaves it out).
if [ "${AUTO_TUNE:-1}" != 0 ]; then
  rm -rf "$tmp/tune"
  { XDG_CACHE_HOME="$tmp/tune" "$build/sol" tune --quick --time-limit 60 2>&1 | grep -E 'judged|shapes|stopped|sol: '
    XDG_CACHE_HOME="$tmp/tune" "$build/sol" tune --show 2>&1; } | tee "$out/tune.txt" | tail -20
fi
if [ "${AUTO_MLP:-1}" != 0 ]; then
  # The kernels `sol backends` says would fit ("set OPENBLAS_CORETYPE=SkylakeX ..."), if any.
  best=$(grep -o 'OPENBLAS_CORETYPE=[A-Za-z]*' "$out/backends.txt" | head -1 | cut -d= -f2)
  python3 "$root/bench/auto_mlp.py" "$build" --quick --c-only ${best:+--best-core "$best"} 2>&1 |
    tee "$out/mlp_gemms.txt"
  # Two auto processes sharing a fresh profile: each class's race and trial in use (with the
  # program's steps on each side), and where the classes went ($OUT/mlp_trials.txt).
  {
    echo "bench_mlp_gemms 20 under auto, two processes sharing a fresh profile: ms for the first step, then per later step"
    rm -rf "$tmp/mlp"
    for i in 1 2; do
      echo "process $i: $(XDG_CACHE_HOME="$tmp/mlp" SOL_LOG=debug LD_PRELOAD="$build/libsol.so" \
        "$build/bench/bench_mlp_gemms" 20 2>"$tmp/mlp.log" | cut -d' ' -f1,2)"
      grep -E '^sol: (measured|tried) ' "$tmp/mlp.log" | cut -c1-300
    done
    XDG_CACHE_HOME="$tmp/mlp" "$build/sol" tune --show 2>&1
  } 2>&1 | tee "$out/mlp_trials.txt" | grep -E '^process|\*'
fi
[ "${AUTO_SWEEP:-1}" = 0 ] && exit 0
python3 "$root/bench/auto_sweep.py" "$build" --sizes "${AUTO_SIZES:-64,256,1024}" --trans "${AUTO_TRANS:-NN,TN}" \
  --types "${AUTO_TYPES:-s,d}" 2>&1 | tee "$out/sweep.txt"
