#!/usr/bin/env bash
# Checks the clang thread-safety annotations (GUARDED_BY, REQUIRES, EXCLUDES: core/mutex.h,
# core/thread_annotations.h) of the daemon's concurrent code: a clang build (no CUDA, no tests)
# of the service, the store, the gRPC shell, the metrics, the worker backend and the peers with
# -Wthread-safety -Werror=thread-safety, and of the kernels' vendor members (kernels/vendor.cc,
# against the CUDA headers) and the C++ Transposer (client/transposer.cc). Cheap: only those libraries' own sources are compiled.
# Run by .ci/run.
#   deploy/thread-safety.sh            env: BUILD_DIR (default build-clang), CXX_CLANG / CC_CLANG
#                                      (default clang++ / clang, else clang++-14 / clang-14)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${BUILD_DIR:-build-clang}
cxx=${CXX_CLANG:-$(command -v clang++ || command -v clang++-14 || true)}
cc=${CC_CLANG:-$(command -v clang || command -v clang-14 || true)}
if [ -z "$cxx" ] || [ -z "$cc" ]; then
  echo "thread-safety: clang not found (deploy/install-deps.sh installs it)" >&2
  exit 1
fi
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DTRANSPOSED_CUDA=OFF -DBUILD_TESTING=OFF \
  -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" >/dev/null
cmake --build "$dir" -j "${JOBS:-$(nproc)}" --target \
  transposed_store transposed_service transposed_grpc_service transposed_worker \
  transposed_fleet transposed_daemon
# The kernels' vendor members (cuBLAS/cuTENSOR handles and plans, kernels/vendor.cc) build only
# with CUDA: their host code is checked on its own, against the CUDA Toolkit's headers.
cuda_include=${CUDA_INCLUDE:-}
if [ -z "$cuda_include" ]; then
  for d in /usr/local/cuda/include /usr/include; do
    if [ -f "$d/cuda_runtime_api.h" ]; then cuda_include=$d; break; fi
  done
fi
if [ -n "$cuda_include" ]; then
  "$cxx" -std=c++17 -fsyntax-only -Wthread-safety -Werror=thread-safety -I. -Ikernels/include \
    -I"$cuda_include" kernels/vendor.cc
  # The C++ Transposer's plan map (client/transposer.cc), against the generated proto headers.
  "$cxx" -std=c++17 -fsyntax-only -Wthread-safety -Werror=thread-safety -I. -Ikernels/include \
    -I"$dir/generated" -I"$cuda_include" client/transposer.cc
else
  echo "thread-safety: no cuda_runtime_api.h (CUDA_INCLUDE unset): kernels/vendor.cc not checked" >&2
fi
echo "thread-safety: the annotated code passes clang -Wthread-safety"
