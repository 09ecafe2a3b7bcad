#!/usr/bin/env bash
# Configures and builds transposed into ./build (or $BUILD_DIR). Extra arguments go to CMake,
# e.g. deploy/build.sh -DTRANSPOSED_CUDA=OFF or -DTRANSPOSED_SANITIZE=address.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc)}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo} "$@"
cmake --build "$BUILD_DIR" -j "$JOBS"
