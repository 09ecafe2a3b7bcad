#!/usr/bin/env bash
# Installs the tests' packages (if needed), builds (if needed) and runs every test that needs no
# GPU: CTest labels `unit` and `integration`. On a GPU machine, bench/run_gpu.sh runs the `gpu` tests and the benchmark.
# Tests that skip themselves (a tool they need is missing) are listed as SKIPPED after CTest's
# summary; with $CI set they fail the run.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
bash deploy/install-deps.sh --tests
# The tests on explicitly: a build directory the quick start configured has them off.
bash deploy/build.sh -DTRANSPOSED_BUILD_TESTING=ON
# A skipped test (a tool it needs is missing) is not a passed one: CTest still says "100% tests
# passed", so the skipped ones are listed after it, and with $CI set (.ci/run) they fail the run.
log=$(mktemp)
trap 'rm -f "$log"' EXIT
set +e
ctest --test-dir "$BUILD_DIR" --label-exclude gpu --output-on-failure -j "${JOBS:-$(nproc)}" "$@" |
  tee "$log"
rc=${PIPESTATUS[0]}
set -e
bash deploy/ctest-skips.sh "$log" || rc=1
exit "$rc"
