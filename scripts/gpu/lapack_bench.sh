#!/bin/bash
# LAPACK on the GPU: dgetrf and dpotrf of the reference LAPACK (Debian's liblapack.so.3, whose
# blocked factorizations are calls into libblas.so.3) timed four ways, in under 210 s:
#   cpu       the BLAS is OpenBLAS (Debian's, from gpu-carry/openblas; all cores)
#   nvblas    NVIDIA's NVBLAS preloaded: its level-3 routines on the GPU (cuBLAS-XT, tiles sent from
#             and back to host memory on every call), the rest in OpenBLAS (NVBLAS_CPU_BLAS_LIB)
#   sol-cuda  libsol preloaded with SOL_BACKEND=cuda: every BLAS call on the GPU through cuBLAS,
#             eager (each call's operands up and its results back); the bytes from `sol: transfers:`
#   sol-cuda-lazy  the same, lazily (SOL_LAZY's default): the factors stay on the device between
#             calls, written back when the host reads them
# and, named in LAPACK_METHODS only, two rows that split lazy's cost from eager's:
#   sol-cuda-served  eager, with large allocations served by SOL as the lazy executor serves them
#             (SOL_TEST_SERVE_FROM=65536): the cost of serving alone
#   sol-cuda-lazy-unserved  lazily, nothing served (SOL_LAZY_MIN_BYTES=2^40): every operand moves
#             as eagerly, through the lazy executor's path
# LAPACK_METHODS and LAPACK_ROUTINES (space-separated) choose rows and routines; LAPACK_REPEAT=K
# runs each row K times in turn (rows named METHOD#2...), so that alternating runs can be compared.
# bench/lapack.c checks each run (scaled backward error below 30, by plain substitution, no BLAS)
# and prints a checksum of the factors; a GPU row agrees when its checksum is within 1e-6 of the
# cpu row's. Prints the table (format: bench/README.md, "LAPACK on the GPU") to stdout and to
# $OUT/lapack_table.txt; the runs' output is in $OUT/lapack/. Exits 1 when a run failed or disagreed.
#
# Run from the repository root:
#   SOL_BUILD=<dir with libsol.so, bench/bench_lapack> OUT=<log dir> [LAPACK_N=8192] scripts/gpu/lapack_bench.sh
# Without a GPU the GPU rows are SKIP (LAPACK_FORCE_GPU=1 runs them anyway: to test this script);
# without gpu-carry/ the machine's own Debian libraries are used.
set -u
: "${SOL_BUILD:?set SOL_BUILD to the build directory}" "${OUT:?set OUT to a directory for logs}"
start=$SECONDS
deadline=$((start + ${LAPACK_BUDGET_S:-210}))
root=$(pwd)
# shellcheck source=scripts/gpu/common.sh
. "$root/scripts/gpu/common.sh"
n=${LAPACK_N:-8192}
build=$(cd "$SOL_BUILD" && pwd)
export -n SOL_BUILD  # libsol warns of SOL_ variables it does not know
mkdir -p "$OUT/lapack"
out=$(cd "$OUT" && pwd)
logs=$out/lapack
table=$out/lapack_table.txt
: > "$table"
failed=0
say() { echo "$*" | tee -a "$table"; }

program=$build/bench/bench_lapack
[ -x "$program" ] || { say "FAIL: $program is missing (ninja -C $SOL_BUILD bench_lapack)"; exit 1; }

# The libraries: gpu-carry's, else Debian's own.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if carry_open "$root/gpu-carry" "$tmp/carry" && [ -e "$carry_dir/lapack/liblapack.so.3" ] &&
   [ -e "$carry_dir/openblas/libopenblas.so.0" ]; then
  lapack_dir=$carry_dir/lapack openblas_dir=$carry_dir/openblas sys_dir=$carry_dir/syslib
else
  lapack_dir=/usr/lib/x86_64-linux-gnu/lapack openblas_dir=/usr/lib/x86_64-linux-gnu/openblas-pthread sys_dir=
fi
[ -e "$lapack_dir/liblapack.so.3" ] && [ -e "$openblas_dir/libblas.so.3" ] ||
  { say "FAIL: no reference LAPACK or OpenBLAS (scripts/gpu/make_carry.sh)"; exit 1; }
base_path="$lapack_dir:$openblas_dir${sys_dir:+:$sys_dir}"

gpu=1
gpu_present "$logs/nvidia-smi.txt" || gpu=0
[ "${LAPACK_FORCE_GPU:-0}" = 1 ] && gpu=1
say "lapack_bench: n=$n, reference LAPACK ($lapack_dir/liblapack.so.3) over each BLAS; $(nproc) CPUs; $(grep -m1 '^GPU ' "$logs/nvidia-smi.txt" 2>/dev/null || echo 'no GPU')"

# NVBLAS and the CUDA libraries it and libsol load.
nvblas=
cuda_path=
if [ $gpu = 1 ]; then
  nvblas=$(find_cuda_lib libnvblas.so)
  for lib in libcublas.so.13 libcublasLt.so.13 libcudart.so.13; do
    p=$(find_cuda_lib "$lib")
    [ -n "$p" ] && case ":$cuda_path:" in *":$(dirname "$p"):"*) ;; *) cuda_path="$cuda_path:$(dirname "$p")" ;; esac
  done
  [ -n "$nvblas" ] && case ":$cuda_path:" in *":$(dirname "$nvblas"):"*) ;; *) cuda_path="$cuda_path:$(dirname "$nvblas")" ;; esac
  cat > "$logs/nvblas.conf" <<CONF
NVBLAS_LOGFILE $logs/nvblas.log
NVBLAS_CPU_BLAS_LIB $openblas_dir/libblas.so.3
NVBLAS_GPU_LIST ALL
NVBLAS_TILE_DIM 2048
CONF
  say "nvblas: ${nvblas:-not found}; sol: $build/libsol.so, SOL_BACKEND=cuda (eager, and lazily)"
fi

# run METHOD ROUTINE: one process; its line in $logs/METHOD.ROUTINE.txt, stderr beside it.
run() {
  local method=$1 routine=$2 left=$((deadline - SECONDS - 3)) limit
  limit=$((left < 50 ? left : 50))
  local stem=$logs/$3.$routine
  if [ "$limit" -lt 5 ]; then
    echo "SKIP: no time left of the ${LAPACK_BUDGET_S:-210} s budget" > "$stem.err"
    return 1
  fi
  case $method in
    cpu) LD_LIBRARY_PATH=$base_path timeout "$limit" "$program" "$routine" "$n" > "$stem.txt" 2> "$stem.err" ;;
    nvblas)
      LD_LIBRARY_PATH=$base_path$cuda_path NVBLAS_CONFIG_FILE=$logs/nvblas.conf LD_PRELOAD=$nvblas \
        timeout "$limit" "$program" "$routine" "$n" > "$stem.txt" 2> "$stem.err" ;;
    sol-cuda)
      LD_LIBRARY_PATH=$base_path$cuda_path SOL_BACKEND=cuda SOL_LAZY=0 SOL_LOG=info LD_PRELOAD=$build/libsol.so \
        timeout "$limit" "$program" "$routine" "$n" > "$stem.txt" 2> "$stem.err" ;;
    sol-cuda-lazy)
      LD_LIBRARY_PATH=$base_path$cuda_path SOL_BACKEND=cuda SOL_LOG=info \
        LD_PRELOAD=$build/libsol.so timeout "$limit" "$program" "$routine" "$n" > "$stem.txt" 2> "$stem.err" ;;
    sol-cuda-served)
      LD_LIBRARY_PATH=$base_path$cuda_path SOL_BACKEND=cuda SOL_LAZY=0 SOL_TEST_SERVE_FROM=65536 SOL_LOG=info \
        LD_PRELOAD=$build/libsol.so timeout "$limit" "$program" "$routine" "$n" > "$stem.txt" 2> "$stem.err" ;;
    sol-cuda-lazy-unserved)
      LD_LIBRARY_PATH=$base_path$cuda_path SOL_BACKEND=cuda SOL_LAZY_MIN_BYTES=1099511627776 SOL_LOG=info \
        LD_PRELOAD=$build/libsol.so timeout "$limit" "$program" "$routine" "$n" > "$stem.txt" 2> "$stem.err" ;;
    *) echo "lapack_bench: unknown method $method" > "$stem.err"; return 1 ;;
  esac
}
field() {  # field FILE KEY: the value of KEY=... in the program's line
  sed -n "s/.* $2=\([^ ]*\).*/\1/p" "$1" | head -1
}
human() {  # bytes as GB/MB
  awk -v b="$1" 'BEGIN { if (b == "") print "-"; else if (b >= 1e9) printf "%.2f GB\n", b / 1e9; else printf "%.1f MB\n", b / 1e6 }'
}

printf -v header '%-22s %-6s %6s %9s %8s %8s %10s %10s %9s  %s' method routine n seconds GFLOP/s first_s to_device back residual agrees
say "$header"
rows=
for method in ${LAPACK_METHODS:-cpu nvblas sol-cuda sol-cuda-lazy}; do
  rows="$rows $method"
  for ((k = 2; k <= ${LAPACK_REPEAT:-1}; ++k)); do [ "$method" = cpu ] || rows="$rows $method#$k"; done
done
# Repeats alternate: every row once, then every row again.
ordered=
for ((k = 1; k <= ${LAPACK_REPEAT:-1}; ++k)); do
  for r in $rows; do
    case $r in *"#$k") ordered="$ordered $r" ;; *"#"*) ;; *) [ $k = 1 ] && ordered="$ordered $r" ;; esac
  done
done
for routine in ${LAPACK_ROUTINES:-getrf potrf}; do
  ref_sum=
  for label in $ordered; do
    method=${label%#*}
    stem=$logs/$label.$routine
    if [ "$method" != cpu ] && [ $gpu = 0 ]; then
      printf -v row '%-22s %-6s %6s  SKIP: no GPU (nvidia-smi -L lists none)' "$label" "$routine" "$n"
      say "$row"
      continue
    fi
    if [ "$method" = nvblas ] && [ -z "$nvblas" ]; then
      printf -v row '%-22s %-6s %6s  SKIP: no libnvblas.so (ld.so cache, /usr/local/cuda, pip wheels)' "$label" "$routine" "$n"
      say "$row"
      continue
    fi
    run "$method" "$routine" "$label"
    rc=$?
    if ! grep -q '^lapack ' "$stem.txt" 2> /dev/null; then
      printf -v row '%-22s %-6s %6s  FAIL: exit %s: %s' "$label" "$routine" "$n" "$rc" \
        "$(grep -v '^$' "$stem.err" 2> /dev/null | tail -1 | cut -c1-100)"
      say "$row"
      failed=1
      continue
    fi
    sum=$(field "$stem.txt" checksum)
    up=- down=-
    if [ "${method#sol-cuda}" != "$method" ]; then
      line=$(grep -m1 'sol: transfers:' "$stem.err")
      up=$(human "$(echo "$line" | sed -n 's/.* \([0-9]*\) bytes to the device.*/\1/p')")
      down=$(human "$(echo "$line" | sed -n 's/.* \([0-9]*\) bytes back.*/\1/p')")
      # Without the line no node ran on the device (libsol ran the calls elsewhere, and said why).
      [ -z "$line" ] && { up="none"; down="none"; }
    elif [ "$method" = nvblas ]; then
      up=n/a down=n/a
    fi
    if [ "$method" = cpu ]; then
      ref_sum=$sum
      agrees=reference
    elif [ -z "$ref_sum" ]; then
      agrees="? (no cpu row)"
    else
      agrees=$(awk -v a="$sum" -v b="$ref_sum" 'BEGIN { d = (a - b) / b; if (d < 0) d = -d;
        printf "%s (checksum %.1e)", d <= 1e-6 ? "yes" : "NO", d }')
    fi
    [ "$rc" != 0 ] && agrees="$agrees, exit $rc"
    case $agrees in NO*|*exit*) failed=1 ;; esac
    [ "${method#sol-cuda}" != "$method" ] && [ "$up" = none ] && { agrees="$agrees, NOT on the device"; failed=1; }
    printf -v row '%-22s %-6s %6s %9s %8s %8s %10s %10s %9s  %s' "$label" "$routine" "$n" \
      "$(field "$stem.txt" seconds)" "$(field "$stem.txt" gflops)" "$(field "$stem.txt" first)" "$up" "$down" \
      "$(field "$stem.txt" residual)" "$agrees"
    say "$row"
  done
done
say "lapack_bench: $((SECONDS - start)) s; $([ $failed = 0 ] && echo 'all runs agree' || echo 'FAILED') (logs in $logs)"
exit $failed
