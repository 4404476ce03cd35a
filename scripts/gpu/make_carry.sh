#!/bin/sh
# Creates gpu-carry/ at the repository root: what scripts/gpu/cuda_backend.sh needs on a GPU
# machine that lacks Debian's packages (kept small, about 8 MiB):
#   gpu-carry/blas/  the reference BLAS (Debian libblas3's libblas.so.3), the BLAS test programs
#                    (libblas-test: xblat*, x*cblat*) and their input files
#   gpu-carry/lib/   the shared libraries those programs and libsol need beyond glibc and the
#                    dynamic loader (libgfortran, libquadmath, libstdc++...), from this machine
# Usage: scripts/gpu/make_carry.sh [build dir holding libsol.so and sol; default build]
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
blas=/usr/lib/x86_64-linux-gnu/blas
out=$root/gpu-carry
[ -f "$blas/libblas.so.3" ] && [ -x "$blas/xblat1s" ] || {
  echo "make_carry: $blas lacks the reference BLAS or its test programs (apt-get install libblas3 libblas-test)" >&2
  exit 1
}
rm -rf "$out"
mkdir -p "$out/blas" "$out/lib"
cp -L "$blas/libblas.so.3" "$out/blas/"
for f in "$blas"/xblat* "$blas"/x?cblat* "$blas"/*.in "$blas"/[sdcz]in[23]; do cp -L "$f" "$out/blas/"; done

# Dependencies outside glibc: ldd's resolved paths, except the C library's own objects, which must
# be the GPU machine's (and the BLAS the programs link: the carried reference one replaces it).
deps() {
  ldd "$@" 2>/dev/null | awk '/=> \// { print $1, $3 }' | sort -u | while read -r name path; do
    case $name in
      libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|ld-linux*|libblas.so.*|libopenblas*) ;;
      *) echo "$path" ;;
    esac
  done
}
targets="$out/blas/xblat3s $out/blas/xscblat3"
for f in "$build/libsol.so" "$build/sol"; do [ -e "$f" ] && targets="$targets $f"; done
for path in $(deps $targets); do cp -L "$path" "$out/lib/"; done
du -sh "$out"
ls "$out/lib"
