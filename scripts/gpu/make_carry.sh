#!/bin/sh
# Creates gpu-carry/ at the repository root: what the scripts in scripts/gpu/ need on a GPU machine
# that lacks Debian's packages (about 22 MiB; the large libraries xz-compressed, unpacked there by
# scripts/gpu/common.sh's carry_open):
#   gpu-carry/blas/     the reference BLAS (Debian libblas3's libblas.so.3), the BLAS test programs
#                       (libblas-test: xblat*, x*cblat*) and their input files
#   gpu-carry/lapack/   the reference LAPACK (Debian liblapack3's liblapack.so.3), whose
#                       factorizations are calls into libblas.so.3 (lapack_bench.sh)
#   gpu-carry/openblas/ OpenBLAS (Debian libopenblas0-pthread: its libblas.so.3 and
#                       libopenblas.so.0), the CPU BLAS of lapack_bench.sh
#   gpu-carry/dnnl/     oneDNN (Debian libdnnl2's libdnnl.so.2), for the DNN check of
#                       cuda_backend.sh
#   gpu-carry/lib/      the shared libraries all these and libsol need beyond glibc and the dynamic
#                       loader (libgfortran, libquadmath, libgomp, libOpenCL...), from this machine
# Usage: scripts/gpu/make_carry.sh [build dir holding libsol.so and sol; default build]
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
lib=/usr/lib/x86_64-linux-gnu
blas=$lib/blas
out=$root/gpu-carry
for f in "$blas/libblas.so.3" "$blas/xblat1s" "$lib/lapack/liblapack.so.3" "$lib/openblas-pthread/libblas.so.3" \
         "$lib/openblas-pthread/libopenblas.so.0" "$lib/libdnnl.so.2"; do
  [ -e "$f" ] || {
    echo "make_carry: $f is missing (apt-get install libblas3 libblas-test liblapack3 libopenblas0-pthread libdnnl2)" >&2
    exit 1
  }
done
rm -rf "$out"
mkdir -p "$out/blas" "$out/lapack" "$out/openblas" "$out/dnnl" "$out/lib"
cp -L "$blas/libblas.so.3" "$out/blas/"
for f in "$blas"/xblat* "$blas"/x?cblat* "$blas"/*.in "$blas"/[sdcz]in[23]; do cp -L "$f" "$out/blas/"; done
xz -9 -T2 -c "$lib/lapack/liblapack.so.3" > "$out/lapack/liblapack.so.3.xz"
xz -9 -T2 -c "$lib/openblas-pthread/libblas.so.3" > "$out/openblas/libblas.so.3.xz"
xz -9 -T2 -c "$lib/openblas-pthread/libopenblas.so.0" > "$out/openblas/libopenblas.so.0.xz"
xz -9 -T2 -c "$lib/libdnnl.so.2" > "$out/dnnl/libdnnl.so.2.xz"

# Dependencies outside glibc: ldd's resolved paths, except the C library's own objects, which must
# be the GPU machine's (and the BLAS the programs link: the carried ones replace it).
deps() {
  ldd "$@" 2>/dev/null | awk '/=> \// { print $1, $3 }' | sort -u | while read -r name path; do
    case $name in
      libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|ld-linux*|libblas.so.*|libopenblas*|liblapack*|libdnnl*) ;;
      *) echo "$path" ;;
    esac
  done
}
targets="$out/blas/xblat3s $out/blas/xscblat3 $lib/lapack/liblapack.so.3 $lib/openblas-pthread/libopenblas.so.0 $lib/libdnnl.so.2"
for f in "$build/libsol.so" "$build/sol"; do [ -e "$f" ] && targets="$targets $f"; done
for path in $(deps $targets); do cp -L "$path" "$out/lib/"; done
du -sh "$out"
ls "$out/lib"
