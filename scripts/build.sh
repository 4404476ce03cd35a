#!/usr/bin/env bash
# Configures and builds SOL into ./build (or $BUILD_DIR).
#   scripts/build.sh          everything: libsol, the sol command, the tests and the benchmarks
#   scripts/build.sh --demo   only what scripts/demo.sh runs: libsol and the sol command (target
#                             sol_demo); a first configure leaves out the tests and debug information
# Extra arguments go to the build tool (scripts/build.sh --demo -n: what it would build).
# Every warning in SOL's own code is an error here (SOL_WERROR), so that CI (scripts/test.sh) fails
# on a new one; a plain `cmake` configure keeps them warnings.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
demo=0
if [ "${1:-}" = "--demo" ]; then
  demo=1
  shift
fi
cache="$BUILD_DIR/CMakeCache.txt"
if [ ! -f "$cache" ]; then
  generator=()
  command -v ninja >/dev/null && generator=(-G Ninja)
  first=(-DBUILD_TESTING=ON)
  [ $demo = 1 ] && first=(-DBUILD_TESTING=OFF -DSOL_DEBUG_INFO=OFF)
  cmake -S . -B "$BUILD_DIR" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSOL_WERROR=ON "${first[@]}"
elif ! grep -qx "SOL_WERROR:BOOL=ON" "$cache" || { [ $demo = 0 ] && ! grep -qx "BUILD_TESTING:BOOL=ON" "$cache"; }; then
  cmake -S . -B "$BUILD_DIR" -DSOL_WERROR=ON $([ $demo = 0 ] && echo -DBUILD_TESTING=ON)
fi
targets=()
[ $demo = 1 ] && targets=(--target sol_demo)
cmake --build "$BUILD_DIR" -j "$(nproc)" "${targets[@]}" -- "$@"
