#!/usr/bin/env bash
# Installs what SOL needs to build and test on Debian 12 (run as root, or with sudo available).
# Idempotent: packages already installed are not fetched again.
#
# Then, as the user running it, the tests' own inputs in $SOL_TEST_DEPS (default
# ${XDG_CACHE_HOME:-~/.cache}/sol-test), each made once:
#   venv/          pip's NumPy and SciPy wheels (what most Python users run), from PyPI
#   lapack/        the reference BLAS test programs' Fortran sources (BLAS/TESTING), from the
#                  Debian source package of the installed libblas64-3, fetched with a private apt
#                  state (the system's apt sources are left as they are)
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
  # tests: ILP64 BLAS with the plain names (Debian's reference and OpenBLAS builds), the ILP64
  # reference BLAS test programs built from source (gfortran), pip's wheels in a venv
  libblas64-3 libopenblas64-0-pthread gfortran python3-venv
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
else
  as_root=()
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "setup: run as root (or install sudo) to install: ${missing[*]}" >&2; exit 1; }
    as_root=(sudo)
  fi
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  "${as_root[@]}" apt-get update -q
  "${as_root[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

DEPS=${SOL_TEST_DEPS:-${XDG_CACHE_HOME:-$HOME/.cache}/sol-test}
mkdir -p "$DEPS"

# pip's wheels, pinned: the tests name what these builds import (scipy_cblas_sgemm64_...).
WHEELS=(numpy==2.4.6 scipy==1.17.1)
venv=$DEPS/venv
if "$venv/bin/python" -c "import numpy, scipy, sys; sys.exit(numpy.__version__ + ' ' + scipy.__version__ != '${WHEELS[0]#*==} ${WHEELS[1]#*==}')" 2>/dev/null; then
  echo "setup: $venv has ${WHEELS[*]}"
else
  echo "setup: making $venv with ${WHEELS[*]}"
  rm -rf "$venv"
  /usr/bin/python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check --only-binary :all: "${WHEELS[@]}"
fi

# The BLAS test programs' sources, from the same source package as the installed libblas64-3.
testing=$DEPS/lapack/BLAS/TESTING
if [ -f "$testing/dblat3.f" ]; then
  echo "setup: $testing present"
else
  version=$(dpkg-query -W -f='${source:Version}' libblas64-3)
  . /etc/os-release
  apt_dir=$DEPS/apt
  mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$apt_dir/src"
  echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $VERSION_CODENAME main" \
    > "$apt_dir/sources.list"
  apt_private=(-o Dir::Etc::SourceList="$apt_dir/sources.list" -o Dir::Etc::SourceParts=/dev/null
               -o Dir::State::Lists="$apt_dir/lists" -o Dir::Cache="$apt_dir/cache" -o APT::Sandbox::User=)
  echo "setup: fetching the lapack $version sources into $DEPS/lapack"
  apt-get "${apt_private[@]}" update -q >/dev/null
  (cd "$apt_dir/src" && apt-get "${apt_private[@]}" source --download-only -q "lapack=$version" >/dev/null)
  rm -rf "$DEPS/lapack"
  mkdir -p "$DEPS/lapack"
  tar -xzf "$apt_dir/src"/lapack_*.orig.tar.gz -C "$DEPS/lapack" --strip-components=1 --wildcards '*/BLAS/TESTING/*'
  rm -rf "$apt_dir"
fi
