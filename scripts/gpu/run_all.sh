#!/bin/bash
# Every GPU check in one device run (run from the repository root on the GPU machine, after
# scripts/gpu/pack.sh here): the cuda backend (eager and lazy), the LAPACK bench, then the cuBLAS
# and cuDNN trace checks. Each part's logs go to $OUT/<part>.tgz as soon
# as it ends, so a run cut short still returns what finished. Parts: PARTS="cublas_trace ...".
# About 6 minutes on an H200 with the LAPACK bench at n = 8192.
cd "$(dirname "$0")/../.." || exit 1
: "${OUT:?OUT must name a directory for the logs}"
L=/tmp/sol-gpu-logs
mkdir -p "$L"
T0=$SECONDS
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null || echo "run_all: no nvidia-smi (each part says SKIP without a GPU)"
# The C test programs are linked to libblas.so.3 at Debian's path.
if [ ! -e /usr/lib/x86_64-linux-gnu/blas/libblas.so.3 ]; then
  mkdir -p /usr/lib/x86_64-linux-gnu/blas && cp gpu-carry/blas/libblas.so.3 /usr/lib/x86_64-linux-gnu/blas/
fi
export PYTHONUNBUFFERED=1
part() {  # part NAME TIMEOUT
  SOL_BUILD=.gpu/build OUT=$L/$1 timeout "$2" bash "scripts/gpu/$1.sh" > "$L/$1.txt" 2>&1
  echo "== $1 rc=$? at $((SECONDS - T0)) s"
  grep -v '^PASS: x' "$L/$1.txt" | tail -40
  tar czf "$OUT/$1.tgz" -C "$L" "$1" "$1.txt" 2>/dev/null
}
for p in ${PARTS:-cuda_backend lapack_bench cublas_trace cudnn_trace}; do
  case $p in
    cublas_trace) part cublas_trace 110 ;;
    cudnn_trace) part cudnn_trace 80 ;;
    cuda_backend) part cuda_backend 240 ;;
    lapack_bench) LAPACK_BUDGET_S=${LAPACK_BUDGET_S:-140} part lapack_bench 150 ;;
    auto_cpu) part auto_cpu 300 ;;  # not a GPU check: auto on this machine's CPU (PARTS=auto_cpu)
    *) echo "run_all: unknown part $p" ;;
  esac
done
echo "total $((SECONDS - T0)) s"
