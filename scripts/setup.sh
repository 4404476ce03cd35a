#!/usr/bin/env bash
# Installs what SOL needs to build and test on Debian 12 (run as root, or with sudo available).
# Idempotent: packages already installed are not fetched again.
set -euo pipefail

PACKAGES=(
  # build
  cmake ninja-build g++ pkg-config python3 binutils
  libtomlplusplus-dev nlohmann-json3-dev libunwind-dev libcli11-dev libdw-dev
  # the libraries SOL intercepts and the backends it drives
  libblas-dev libopenblas-dev libdnnl-dev
  ocl-icd-opencl-dev opencl-c-headers libclblast-dev pocl-opencl-icd clinfo
  # tests: the reference BLAS test programs, GoogleTest, real NumPy and PyTorch
  libblas-test libgtest-dev python3-pytest python3-numpy python3-torch
  # tests: the reference LAPACK over libblas.so.3 (test_lazy.py, bench_lapack)
  liblapack3
  # tests: MiniDebugInfo sections are made with xz (test_frame_names.py)
  xz-utils
  # benchmarks compare against these
  ltrace
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} packages present"
  exit 0
fi

as_root=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "setup: run as root (or install sudo) to install: ${missing[*]}" >&2; exit 1; }
  as_root=(sudo)
fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" apt-get update -q
"${as_root[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
