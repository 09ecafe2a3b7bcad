#!/usr/bin/env bash
# Installs the tests' packages (if needed), builds (if needed) and runs every test that needs no
# GPU: CTest labels `unit` and `integration`. On a GPU machine, bench/run_gpu.sh runs the `gpu` tests and the benchmark.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
bash deploy/install-deps.sh --tests
bash deploy/build.sh
ctest --test-dir "$BUILD_DIR" --label-exclude gpu --output-on-failure -j "${JOBS:-$(nproc)}" "$@"
