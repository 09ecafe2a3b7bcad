#!/usr/bin/env bash
# Configures and builds transposed into ./build (or $BUILD_DIR). Extra arguments go to CMake,
# e.g. deploy/build.sh -DTRANSPOSED_CUDA=OFF or -DTRANSPOSED_SANITIZE=address. TARGETS (space-
# separated) builds only those targets instead of everything, e.g. TARGETS=programs (the daemon,
# the CLI and the CUDA worker: what the quick start runs).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc)}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo} "$@"
read -r -a targets <<< "${TARGETS:-}"
cmake --build "$BUILD_DIR" -j "$JOBS" ${targets[@]:+--target "${targets[@]}"}
