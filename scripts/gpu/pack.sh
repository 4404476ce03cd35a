#!/bin/sh
# Packs what a GPU machine needs to run scripts/gpu/run_all.sh, from this (Debian) machine's build:
# .gpu/build/ (libsol.so, sol, tests/programs, the cuda and DNN conformance test binaries, the
# LAPACK, GEMM and MLP-step benches; debug info stripped: about 12 MiB) and gpu-carry/ (scripts/gpu/make_carry.sh).
# Both are ignored by git: copy them to the GPU machine beside the checkout.
# Usage: scripts/gpu/pack.sh [build dir; default build]
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
out=$root/.gpu/build
rm -rf "$out"
mkdir -p "$out/tests/unit/cuda" "$out/tests/unit/dnn" "$out/bench"
cp "$build/libsol.so" "$build/sol" "$out/"
[ -x "$build/sol-tune-driver" ] && cp "$build/sol-tune-driver" "$out/"
cp -r "$build/tests/programs" "$out/tests/"
find "$out/tests/programs" -name CMakeFiles -prune -exec rm -rf {} +
rm -f "$out/tests/programs/"*.cmake "$out/tests/programs/Makefile"
for f in "$build"/tests/unit/cuda/test_cuda_*; do [ -x "$f" ] && cp "$f" "$out/tests/unit/cuda/"; done
[ -x "$build/tests/unit/dnn/test_dnn_conformance" ] && cp "$build/tests/unit/dnn/test_dnn_conformance" "$out/tests/unit/dnn/"
for f in bench_lapack bench_gemm bench_mlp_gemms bench_mixed_classes; do [ -x "$build/bench/$f" ] && cp "$build/bench/$f" "$out/bench/"; done
find "$out" -type f -perm -u+x -exec strip --strip-debug {} + 2>/dev/null || true
"$root/scripts/gpu/make_carry.sh" "$build"
grep -qx '/.gpu/' "$root/.git/info/exclude" 2>/dev/null || { mkdir -p "$root/.git/info"; echo '/.gpu/' >> "$root/.git/info/exclude"; }
du -sh "$out" "$root/gpu-carry"
