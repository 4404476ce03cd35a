#!/usr/bin/env bash
# The test command: installs what is missing, builds, runs every test (CTest).
# Extra arguments go to ctest, e.g. scripts/test.sh -L blas  or  scripts/test.sh -R config
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
BUILD_DIR=${BUILD_DIR:-build}
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$(nproc)" "$@"
