#!/usr/bin/env bash
# Builds and runs the non-GPU tests under ASan+UBSan (build-asan) and under TSan (build-tsan).
# CUDA is left out of these builds (the sanitizers instrument host code; the GPU side has
# compute-sanitizer, run by bench/run_gpu.sh). TSan uses server/tsan.supp, which hides reports
# inside the uninstrumented system gRPC and abseil libraries only.
#   deploy/sanitize.sh [address|thread]     default: both
set -euo pipefail
cd "$(dirname "$0")/.."
kinds=${1:-address thread}
for kind in $kinds; do
  dir=build-${kind/address/asan}
  dir=${dir/thread/tsan}
  echo "== $kind sanitizer build in $dir"
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DTRANSPOSED_CUDA=OFF \
    -DTRANSPOSED_SANITIZE="$kind"
  cmake --build "$dir" -j "${JOBS:-$(nproc)}"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  TSAN_OPTIONS="suppressions=$PWD/server/tsan.supp halt_on_error=1" \
    ctest --test-dir "$dir" --label-exclude gpu --output-on-failure -j "${JOBS:-$(nproc)}"
done
