#!/bin/bash
# The cuda backend on a GPU machine, in about three minutes: `sol backends` lists it
# available, a C GEMM chain gives native's results on it (also across fork, where the child falls
# back) with its transfers counted, the 24 reference BLAS test programs pass on SOL_BACKEND=cuda
# exactly as they pass without libsol, a small oneDNN CNN (tests/programs/dnnl_cnn.c, forward and
# backward) gives native oneDNN's results with its primitives on cuDNN, and the DNN conformance
# suite's cuda cases pass; all of these eagerly (SOL_LAZY=0). Then the lazy path (the default:
# device copies kept between nodes, results written back when the host needs them): the GEMM chain
# gives the eager run's sums with fewer flushes than nodes, the CNN native oneDNN's results, the
# 24 BLAS test programs pass as without libsol, and every case of the lazy torture program gives
# the native run's output, eagerly and lazily. Prints one
# PASS/FAIL/SKIP line per check and a summary; exits 1 when a check failed, 0 otherwise (no GPU:
# SKIP, 0).
#
# Run from the repository root:
#   SOL_BUILD=<dir with libsol.so, sol, tests/programs/> OUT=<log dir> scripts/gpu/cuda_backend.sh
# Needs gpu-carry/ (scripts/gpu/make_carry.sh, made on the Debian machine) for the reference BLAS,
# its test programs, oneDNN and the libraries they need; finds cuBLAS, cuDNN and the CUDA runtime
# in the ld.so cache, /usr/local/cuda or the pip wheels (site-packages/nvidia/...).
# CUDA_CHECK_FORCE=1 runs the checks without a GPU (they then fail: for testing this script).
set -u
: "${SOL_BUILD:?set SOL_BUILD to the build directory}" "${OUT:?set OUT to a directory for logs}"
start=$SECONDS
root=$(pwd)
# shellcheck source=scripts/gpu/common.sh
. "$root/scripts/gpu/common.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
carry_open "$root/gpu-carry" "$tmp/carry"
carry=$root/gpu-carry
build=$(cd "$SOL_BUILD" && pwd)
export -n SOL_BUILD  # libsol warns of SOL_ variables it does not know
mkdir -p "$OUT"
out=$(cd "$OUT" && pwd)
: > "$out/summary.txt"
passes=0
fails=0

report() {  # report PASS|FAIL|SKIP text
  echo "$1: $2" | tee -a "$out/summary.txt"
  case $1 in PASS) passes=$((passes + 1)) ;; FAIL) fails=$((fails + 1)) ;; esac
}
# N and F of a "sol: transfers: N nodes, F flushes, ..." line, into $nodes and $flushes (empty
# without such a line).
counts() {
  nodes=$(echo "$1" | sed -n 's/.*transfers: \([0-9]*\) nodes.*/\1/p')
  flushes=$(echo "$1" | sed -n 's/.* \([0-9]*\) flushes.*/\1/p')
}
# Whether such a line says nodes ran on the device, each a flush of its own (eager execution
# counts one flush per node it ran).
ran_eagerly() {
  local nodes flushes
  counts "$1"
  [ -n "$nodes" ] && [ "$nodes" -gt 0 ] && [ "$flushes" = "$nodes" ]
}
# Waits while four jobs run: each program opens its own CUDA context; the GPU serves them together.
throttle() {
  while [ "$(jobs -rp | wc -l)" -ge 4 ]; do wait -n; done
}
finish() {
  report INFO "cuda_backend: $passes passed, $fails failed in $((SECONDS - start)) s (logs in $out)"
  [ "$fails" -eq 0 ]
  exit $?
}

if ! nvidia-smi -L > "$out/nvidia-smi.txt" 2>&1 || ! grep -q '^GPU ' "$out/nvidia-smi.txt"; then
  if [ "${CUDA_CHECK_FORCE:-0}" != 1 ]; then
    report SKIP "no GPU here (nvidia-smi -L lists none): the cuda backend cannot be checked"
    finish
  fi
fi
for f in "$build/libsol.so" "$build/sol" "$build/tests/programs/device_gemms" "$carry/blas/libblas.so.3"; do
  [ -e "$f" ] || { report FAIL "missing $f (SOL_BUILD, or run scripts/gpu/make_carry.sh)"; finish; }
done

# cuBLAS, cuDNN and the CUDA runtime: the ld.so cache, /usr/local/cuda, else the pip wheels' folders.
cuda_dirs=""
for lib in libcublas.so.13 libcudart.so.13 libcudnn.so.9; do
  path=$(find_cuda_lib "$lib")
  [ -n "$path" ] && case ":$cuda_dirs:" in *":$(dirname "$path"):"*) ;; *) cuda_dirs="$cuda_dirs:$(dirname "$path")" ;; esac
done
# The carried libraries the machine lacks (libgfortran...): syslib, after the machine's own.
export LD_LIBRARY_PATH="$carry/blas:$carry_dir/syslib${cuda_dirs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH" > "$out/env.txt"

# 1. sol backends
timeout 60 "$build/sol" backends > "$out/backends.txt" 2>&1
if grep -Eq '^cuda +available' "$out/backends.txt"; then
  report PASS "sol backends: $(grep -E '^cuda ' "$out/backends.txt" | head -1)"
else
  line=$(grep -E '^cuda ' "$out/backends.txt" | head -1)
  report FAIL "sol backends: ${line:-no cuda line: $(head -c 300 "$out/backends.txt")} (see backends.txt)"
  finish
fi

# 2. The C GEMM chain, native and on cuda: the same sums, work on the device, transfers counted.
close() {  # close A B: relative difference below 1e-4
  awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; m = a < 0 ? -a : a; exit !(d <= 1e-4 * (m > 1 ? m : 1)) }'
}
gemms() {  # gemms NAME ARGS...: native and cuda runs, compared line by line
  local name=$1
  shift
  timeout 60 "$build/tests/programs/device_gemms" "$@" > "$out/$name.native.txt" 2>&1
  SOL_BACKEND=cuda SOL_LAZY=0 SOL_LOG=info LD_PRELOAD="$build/libsol.so" timeout 60 \
    "$build/tests/programs/device_gemms" "$@" > "$out/$name.cuda.txt" 2> "$out/$name.cuda.log"
  local native cuda ok=1
  native=$(sort "$out/$name.native.txt" | awk '/sum/ { print $3 }' | tr '\n' ' ')
  cuda=$(sort "$out/$name.cuda.txt" | awk '/sum/ { print $3 }' | tr '\n' ' ')
  set -- $native
  local values=("$@")
  set -- $cuda
  [ ${#values[@]} -gt 0 ] && [ ${#values[@]} -eq $# ] || ok=0
  local i=0
  for v in "$@"; do close "${values[$i]:-nan}" "$v" || ok=0; i=$((i + 1)); done
  local transfers
  transfers=$(grep -m1 'sol: transfers:' "$out/$name.cuda.log")
  if [ $ok = 1 ] && ran_eagerly "$transfers" && echo "$transfers" | grep -Eq ' [1-9][0-9]* bytes to the device'; then
    report PASS "$name: cuda sums [$cuda] = native [$native]; $transfers"
  else
    report FAIL "$name: cuda sums [$cuda] vs native [$native]; transfers: ${transfers:-none} (see $name.cuda.log)"
  fi
}
gemms gemm_chain 1024 768 512 6
gemms gemm_fork 256 256 256 4 fork

# 3. The reference BLAS test programs: exactly the PASSED lines of the run without libsol, no
# failure line, and the work done on the device.
programs="xblat1s xblat1d xblat1c xblat1z xblat2s xblat2d xblat2c xblat2z xblat3s xblat3d xblat3c xblat3z
xscblat1 xdcblat1 xccblat1 xzcblat1 xscblat2 xdcblat2 xccblat2 xzcblat2 xscblat3 xdcblat3 xccblat3 xzcblat3"
input_of() {  # the stdin file and the summary file a program writes
  case $1 in
    xblat1?) echo "- -" ;;
    xblat??) echo "${1: -1}blat${1:5:1}.in ${1: -1}blat${1:5:1}.out" ;;
    x?cblat1) echo "- -" ;;
    x?cblat?) echo "${1:1:1}in${1: -1} -" ;;
  esac
}
run_program() {  # run_program NAME MODE(plain|sol|lazy)
  local name=$1 mode=$2 dir="$out/blas/$1/$2"
  read -r input summary <<< "$(input_of "$name")"
  mkdir -p "$dir"
  [ "$input" != - ] && cp "$carry/blas/$input" "$dir/"
  (
    cd "$dir" || exit 1
    exec < "${input/#-//dev/null}"
    if [ "$mode" = sol ]; then
      SOL_BACKEND=cuda SOL_LAZY=0 SOL_LOG=info LD_PRELOAD="$build/libsol.so" timeout 90 "$carry/blas/$name" \
        > stdout.txt 2> stderr.txt
    elif [ "$mode" = lazy ]; then
      SOL_BACKEND=cuda SOL_LOG=info LD_PRELOAD="$build/libsol.so" timeout 90 "$carry/blas/$name" > stdout.txt 2> stderr.txt
    else
      timeout 90 "$carry/blas/$name" > stdout.txt 2> stderr.txt
    fi
    echo $? > rc.txt
    cat stdout.txt > all.txt
    [ "$summary" != - ] && [ -f "$summary" ] && cat "$summary" >> all.txt
    grep PASS all.txt | sed 's/^ *//; s/ *$//' | sort > passed.txt
  )
}
check_program() {
  local name=$1 dir="$out/blas/$1"
  local rc bad transfers
  rc=$(cat "$dir/sol/rc.txt" 2>/dev/null || echo missing)
  bad=$(grep -Eic 'FAIL|FATAL|SUSPECT|\*\*\*\*|NOT PASS|ILLEGAL' "$dir/sol/all.txt")
  transfers=$(grep -m1 'sol: transfers:' "$dir/sol/stderr.txt")
  if [ "$rc" != 0 ]; then
    report FAIL "$name on cuda: exit status $rc (see blas/$name/sol/stderr.txt)"
  elif [ "$bad" != 0 ]; then
    report FAIL "$name on cuda: $bad failure lines (see blas/$name/sol/all.txt)"
  elif [ ! -s "$dir/sol/passed.txt" ] || ! cmp -s "$dir/plain/passed.txt" "$dir/sol/passed.txt"; then
    report FAIL "$name on cuda: PASSED lines differ from the run without libsol ($(wc -l < "$dir/sol/passed.txt") vs $(wc -l < "$dir/plain/passed.txt"))"
  elif ! ran_eagerly "$transfers"; then
    report FAIL "$name on cuda: no node ran on the device, or flushes differ from nodes (${transfers:-no transfers line})"
  else
    report PASS "$name on cuda: $(wc -l < "$dir/sol/passed.txt") PASSED lines as without libsol; $transfers"
  fi
}
for name in $programs; do
  (run_program "$name" plain; run_program "$name" sol) &
  throttle
done
wait
for name in $programs; do check_program "$name"; done

# 4. A oneDNN CNN (tests/programs/dnnl_cnn.c): native oneDNN (carried) against SOL_BACKEND=cuda,
# each output's sum and sum of magnitudes within 1e-4 of the latter, and where its primitives ran.
cnn=$build/tests/programs/dnnl_cnn
if [ ! -x "$cnn" ] || [ ! -e "$carry_dir/dnnl/libdnnl.so.2" ]; then
  report FAIL "dnnl_cnn: missing $cnn or gpu-carry/dnnl (build with libdnnl; scripts/gpu/make_carry.sh)"
else
  dnnl_path="$carry_dir/dnnl:$LD_LIBRARY_PATH"
  LD_LIBRARY_PATH=$dnnl_path timeout 60 "$cnn" 8 > "$out/dnnl_cnn.native.txt" 2> "$out/dnnl_cnn.native.log"
  LD_LIBRARY_PATH=$dnnl_path SOL_BACKEND=cuda SOL_LAZY=0 SOL_LOG=info LD_PRELOAD="$build/libsol.so" timeout 60 \
    "$cnn" 8 > "$out/dnnl_cnn.cuda.txt" 2> "$out/dnnl_cnn.cuda.log"
  bad=$(awk 'NR == FNR { sum[$1] = $3; abs[$1] = $4; next }
    /^primitives=/ { next }
    { sub("sum=", "", $3); sub("abs=", "", $4); s = sum[$1]; a = abs[$1]; sub("sum=", "", s); sub("abs=", "", a);
      if (s == "") { print $1 " missing natively"; next }
      tol = 1e-4 * (a > 1e-3 ? a : 1e-3); ds = s - $3; da = a - $4; if (ds < 0) ds = -ds; if (da < 0) da = -da;
      if (ds > tol || da > tol) print $1 ": sum " $3 " vs " s ", abs " $4 " vs " a }' \
    "$out/dnnl_cnn.native.txt" "$out/dnnl_cnn.cuda.txt")
  lines=$(grep -c ' n=' "$out/dnnl_cnn.cuda.txt")
  calls=$(grep -m1 -E '^sol: [0-9]+ calls:' "$out/dnnl_cnn.cuda.log")
  transfers=$(grep -m1 'sol: transfers:' "$out/dnnl_cnn.cuda.log")
  if [ "$lines" -eq 0 ] || [ "$lines" -ne "$(grep -c ' n=' "$out/dnnl_cnn.native.txt")" ] || [ -n "$bad" ]; then
    report FAIL "dnnl_cnn on cuda: $lines outputs; ${bad:-output differs} (see dnnl_cnn.*)"
  elif ! ran_eagerly "$transfers"; then
    report FAIL "dnnl_cnn on cuda: no primitive ran on the device, or flushes differ from nodes (${calls:-no calls line}; ${transfers:-no transfers line}; see dnnl_cnn.cuda.log)"
  else
    report PASS "dnnl_cnn on cuda: $lines outputs as native oneDNN's; ${calls#sol: }; $transfers"
  fi
  primitives=$(sed -n 's/^primitives=//p' "$out/dnnl_cnn.cuda.txt")
  if echo "$calls" | grep -Eq "calls: ${primitives:-x} cuda\$"; then
    report PASS "dnnl_cnn: all $primitives primitives on cuda"
  else
    report FAIL "dnnl_cnn: not every primitive on cuda (${calls:-no calls line}; SOL_LOG=debug says why)"
  fi
fi

# 5. The DNN conformance suite's cuda cases (cuDNN against native oneDNN; declined cases skip).
conformance=$build/tests/unit/dnn/test_dnn_conformance
if [ -x "$conformance" ] && [ -e "$carry_dir/dnnl/libdnnl.so.2" ]; then
  LD_LIBRARY_PATH="$carry_dir/dnnl:$LD_LIBRARY_PATH" timeout 120 "$conformance" --gtest_filter='Cuda/*' \
    > "$out/conformance_cuda.txt" 2>&1
  rc=$?
  # Each test's own result line ends with its time; gtest's summary lists them again without.
  count() { grep -c "^\[ *$1 *\] .* ms)\$" "$out/conformance_cuda.txt"; }
  summary="$(count OK) passed, $(count SKIPPED) skipped (declined), $(count FAILED) failed"
  if [ $rc = 0 ]; then report PASS "DNN conformance on cuda: $summary"; else report FAIL "DNN conformance on cuda: exit $rc: $summary (see conformance_cuda.txt)"; fi
else
  report SKIP "DNN conformance on cuda: $conformance or gpu-carry/dnnl missing"
fi

# 6. Lazily (SOL_LAZY's default). The GEMM chain: the eager run's sums (step 2), nodes on the
# device, fewer flushes than nodes (the chain's products stay on the device between calls).
lazy_gemms() {  # lazy_gemms NAME ARGS...: against step 2's eager run of NAME
  local name=$1
  shift
  SOL_BACKEND=cuda SOL_LOG=info LD_PRELOAD="$build/libsol.so" timeout 60 \
    "$build/tests/programs/device_gemms" "$@" > "$out/$name.lazy.txt" 2> "$out/$name.lazy.log"
  local eager lazy transfers nodes flushes
  eager=$(sort "$out/$name.cuda.txt" | awk '/sum/ { print $3 }' | tr '\n' ' ')
  lazy=$(sort "$out/$name.lazy.txt" | awk '/sum/ { print $3 }' | tr '\n' ' ')
  transfers=$(grep -m1 'sol: transfers:' "$out/$name.lazy.log")
  counts "$transfers"
  if [ -z "$lazy" ] || [ "$lazy" != "$eager" ]; then
    report FAIL "$name lazily: sums [$lazy] vs eager [$eager] (see $name.lazy.log)"
  elif [ -z "$nodes" ] || [ "$nodes" -eq 0 ] || [ -z "$flushes" ] || [ "$flushes" -ge "$nodes" ]; then
    report FAIL "$name lazily: not deferred (${transfers:-no transfers line}; see $name.lazy.log)"
  else
    report PASS "$name lazily: sums [$lazy] = eager's; $transfers"
  fi
}
lazy_gemms gemm_chain 1024 768 512 6
# The oneDNN CNN lazily: the eager run's outputs (step 4), the same text.
if [ -x "$cnn" ] && [ -e "$carry_dir/dnnl/libdnnl.so.2" ]; then
  LD_LIBRARY_PATH="$carry_dir/dnnl:$LD_LIBRARY_PATH" SOL_BACKEND=cuda SOL_LOG=info LD_PRELOAD="$build/libsol.so" \
    timeout 60 "$cnn" 8 > "$out/dnnl_cnn.lazy.txt" 2> "$out/dnnl_cnn.lazy.log"
  transfers=$(grep -m1 'sol: transfers:' "$out/dnnl_cnn.lazy.log")
  if [ ! -s "$out/dnnl_cnn.lazy.txt" ] || ! cmp -s "$out/dnnl_cnn.cuda.txt" "$out/dnnl_cnn.lazy.txt"; then
    report FAIL "dnnl_cnn lazily: output differs from the eager run's (see dnnl_cnn.lazy.*)"
  elif ! echo "$transfers" | grep -Eq 'transfers: [1-9][0-9]* nodes'; then
    report FAIL "dnnl_cnn lazily: no node ran on the device (${transfers:-no transfers line})"
  else
    report PASS "dnnl_cnn lazily: outputs = eager's; $transfers"
  fi
fi
# The reference BLAS test programs, lazily: their PASSED lines as without libsol (step 3's runs).
for name in $programs; do
  run_program "$name" lazy &
  throttle
done
wait
for name in $programs; do
  dir="$out/blas/$name"
  rc=$(cat "$dir/lazy/rc.txt" 2>/dev/null || echo missing)
  bad=$(grep -Eic 'FAIL|FATAL|SUSPECT|\*\*\*\*|NOT PASS|ILLEGAL' "$dir/lazy/all.txt")
  transfers=$(grep -m1 'sol: transfers:' "$dir/lazy/stderr.txt")
  if [ "$rc" != 0 ]; then
    report FAIL "$name lazily on cuda: exit status $rc (see blas/$name/lazy/stderr.txt)"
  elif [ "$bad" != 0 ]; then
    report FAIL "$name lazily on cuda: $bad failure lines (see blas/$name/lazy/all.txt)"
  elif [ ! -s "$dir/lazy/passed.txt" ] || ! cmp -s "$dir/plain/passed.txt" "$dir/lazy/passed.txt"; then
    report FAIL "$name lazily on cuda: PASSED lines differ from the run without libsol ($(wc -l < "$dir/lazy/passed.txt") vs $(wc -l < "$dir/plain/passed.txt"))"
  elif ! echo "$transfers" | grep -Eq 'transfers: [1-9][0-9]* nodes'; then
    report FAIL "$name lazily on cuda: no node ran on the device (${transfers:-no transfers line})"
  else
    report PASS "$name lazily on cuda: $(wc -l < "$dir/lazy/passed.txt") PASSED lines as without libsol; $transfers"
  fi
done

# 7. The lazy torture program (tests/programs/lazy_torture.c): every way a program can touch
# pending results (reads and writes, system calls, its own allocator, signal handlers, threads,
# fork, mappings, interrupted calls, exit), each case eagerly and lazily on cuda, its line exactly
# the native run's; lazily, the cases that let results wait need fewer flushes than nodes.
torture=$build/tests/programs/lazy_torture
if [ -x "$torture" ]; then
  timeout 60 "$torture" 256 > "$out/torture.native.txt" 2>&1
  cases="chain inputs shared syscalls allocator signals threads fork mapped interrupts exit"
  for c in $cases; do
    for lazy in 0 1; do
      SOL_BACKEND=cuda SOL_LAZY=$lazy SOL_LOG=info LD_PRELOAD="$build/libsol.so" timeout 60 "$torture" 256 "$c" \
        > "$out/torture.$c.$lazy.txt" 2> "$out/torture.$c.$lazy.log" &
      throttle
    done
  done
  wait
  for c in $cases; do
    want=$(grep "^$c " "$out/torture.native.txt")
    eager=$(tail -1 "$out/torture.$c.0.txt")
    lazy=$(tail -1 "$out/torture.$c.1.txt")
    transfers=$(grep -m1 'sol: transfers:' "$out/torture.$c.1.log")
    counts "$transfers"
    if [ -z "$want" ] || [ "$eager" != "$want" ] || [ "$lazy" != "$want" ]; then
      report FAIL "lazy_torture $c: eager [$eager], lazy [$lazy], native [$want] (see torture.$c.*)"
    elif [ -z "$nodes" ] || [ "$nodes" -eq 0 ]; then
      report FAIL "lazy_torture $c: no node ran on the device lazily (${transfers:-no transfers line})"
    elif case $c in chain|inputs|signals|exit|allocator|interrupts) [ "$flushes" -ge "$nodes" ] ;; *) false ;; esac; then
      report FAIL "lazy_torture $c: nothing waited lazily ($transfers)"
    else
      report PASS "lazy_torture $c: eager and lazy as native; lazily $transfers"
    fi
  done
else
  report FAIL "missing $torture"
fi
finish
