#!/usr/bin/env bash
# GPU tests and benchmark in one command.
#
#   deploy/gpu.sh bundle            # here (no GPU needed): Release build for sm_90 in build-gpu,
#                                   # then every GPU program and its libraries into .gpu/bundle
#                                   # and .gpu/bundle.tar.xz (carry .gpu, without the bundle
#                                   # folder, to the GPU machine: run unpacks it)
#   deploy/gpu.sh run OUTDIR        # on the GPU machine, from the repository root: the kernel
#                                   # test + compute-sanitizer + benchmark (bench/run_gpu.sh, with
#                                   # answer_eval: the ANSWER_NOW answer against the run's
#                                   # measured winners, OUTDIR/kernels/answer_eval.log), the
#                                   # CUDA backend tests, fault test, daemon end to end and search
#                                   # evaluation (tuner/cuda/run_gpu.sh), and the example batch job
#                                   # (client/run_gpu_example.sh), the Python package against
#                                   # torch (python/run_gpu.sh), the user-path benchmark
#                                   # (python/bench/bench_user_path.sh: OUTDIR/user_path/user_path.md,
#                                   # Python and C++ callers against the daemon's stored
#                                   # figures, torch, host cost, hit latency), polite tuning
#                                   # (python/bench/polite_gpu.sh: a torch job's bandwidth with and
#                                   # without the daemon's background tunes), the first answer
#                                   # through a fresh daemon (python/bench/first_answer_gpu.sh:
#                                   # ANSWER_NOW's answers on a fresh random set, seed
#                                   # printed, against the winners of the tunes that
#                                   # follow, both timed side by side: median/p10/worst),
#                                   # the fleet on a machine with 2 GPUs
#                                   # (python/bench/fleet_gpu.sh: a redis-server and a daemon per
#                                   # GPU; the idle GPU's daemon tunes the busy one's misses;
#                                   # "skipped" with one GPU), foreground misses on a busy GPU
#                                   # (python/bench/foreground_gpu.sh, 2 GPUs: a job streams
#                                   # on GPU 0 while `transposectl get` asks 3 new problems;
#                                   # the job's loss per 0.5 s window, where each answer was
#                                   # measured); logs in OUTDIR/*, plus
#                                   # OUTDIR/logs.tar.gz holding all of them, and the inputs of
#                                   # docs/performance.md in OUTDIR/performance/<gpu>.json
#                                   # (deploy/perf_report.py extract; copy them to
#                                   # docs/performance/ and run deploy/perf_report.py render)
# Exit status of `run`: non-zero if any part failed.
set -uo pipefail
cd "$(dirname "$0")/.."
BUNDLE=${BUNDLE:-.gpu/bundle}
PROGRAMS=(kernels_gpu_test transpose_bench transposed-worker transposed-worker-faults
          transposed-fake-worker worker_test cuda_worker_test cuda_backend_test tune_eval answer_eval
          transposed transposectl
          example_batch_job with_daemon transposer_bench)
# Not built here: the shared store of the fleet stage (python/bench/fleet_gpu.sh), with its
# libraries.
SYSTEM_PROGRAMS=(redis-server)
case "${1:-}" in
  bundle)
    set -e
    BUILD_DIR=${BUILD_DIR:-build-gpu}
    cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=${ARCH:-90}
    cmake --build "$BUILD_DIR" -j "${JOBS:-$(nproc)}" --target "${PROGRAMS[@]}"
    rm -rf "$BUNDLE"
    bundle_tool=${BUNDLE_TOOL:-../shared/tools/bundle}
    system=()
    for p in "${SYSTEM_PROGRAMS[@]}"; do
      system+=("$(command -v "$p")") || { echo "gpu.sh bundle: $p is not installed" >&2; exit 1; }
    done
    "$bundle_tool" "$BUNDLE" "${PROGRAMS[@]/#/$BUILD_DIR/bin/}" "${system[@]}"
    strip "$BUNDLE"/bin/* || true
    # The commit the programs were built from, for the run's report (run.txt, docs/performance.md).
    if commit=$(git rev-parse --short HEAD 2>/dev/null); then
      git diff --quiet HEAD -- || commit="$commit (with uncommitted changes)"
    else
      commit="not recorded"
    fi
    echo "$commit" > "$BUNDLE/COMMIT"
    # The Python package (sources, stubs, libtransposed_launch.so) for python/run_gpu.sh.
    cmake --build "$BUILD_DIR" -j "${JOBS:-$(nproc)}" --target transposed_python
    cp -rL "$BUILD_DIR/python" "$BUNDLE/python"
    strip "$BUNDLE/python/transposed/libtransposed_launch.so" || true
    # The device tool carries at most 64 MiB with the working tree. gzip left 66 MB of the 263 MB
    # (2026-11-27, with redis-server): over the limit with the tree's 3 MB. xz's 8 MiB window
    # also finds the kernels that the six fat binaries share: 34 MB.
    rm -f "$BUNDLE.tar.gz"  # an older bundle's, not to be carried beside this one
    tar -C "$(dirname "$BUNDLE")" -cf - "$(basename "$BUNDLE")" | xz -T "${JOBS:-0}" -6 \
      > "$BUNDLE.tar.xz"
    du -sh "$BUNDLE" "$BUNDLE.tar.xz"
    ;;
  run)
    out=${2:?usage: deploy/gpu.sh run OUTDIR}
    mkdir -p "$out"
    if [ ! -d "$BUNDLE" ]; then
      # Python's tarfile reads both formats (.tar.gz: bundles made before the xz one) without
      # the xz program, which a bare GPU machine may lack.
      for packed in "$BUNDLE.tar.xz" "$BUNDLE.tar.gz"; do
        [ -f "$packed" ] || continue
        python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
          "$packed" "$(dirname "$BUNDLE")" || { echo "gpu.sh: cannot unpack $packed"; exit 1; }
        break
      done
    fi
    status=0
    echo "==== kernels: correctness, sanitizers, benchmark"
    bash bench/run_gpu.sh "$BUNDLE" "$out/kernels" || status=1
    echo "==== CUDA backend: tests, fault survival, daemon end to end, search evaluation"
    bash tuner/cuda/run_gpu.sh "$BUNDLE" "$out/backend" || status=1
    echo "==== example batch job through the daemon"
    bash client/run_gpu_example.sh "$BUNDLE" "$out/example" || status=1
    echo "==== Python package: transposed.transpose against torch"
    bash python/run_gpu.sh "$BUNDLE" "$out/python" || status=1
    echo "==== user path: Python and C++ callers against the daemon's stored figures"
    bash python/bench/bench_user_path.sh "$BUNDLE" "$out/user_path" || status=1
    echo "==== polite tuning: a job streaming memory beside the daemon's background tunes"
    bash python/bench/polite_gpu.sh "$BUNDLE" "$out/polite" || status=1
    echo "==== first answer: ANSWER_NOW on a fresh daemon against the tuned winner, side by side"
    bash python/bench/first_answer_gpu.sh "$BUNDLE" "$out/first_answer" || status=1
    echo "==== fleet: an idle GPU's daemon tunes what the busy GPU's daemon misses (2 GPUs)"
    bash python/bench/fleet_gpu.sh "$BUNDLE" "$out/fleet" || status=1
    echo "==== foreground: transposectl get misses on a busy GPU, an idle one in the class (2 GPUs)"
    bash python/bench/foreground_gpu.sh "$BUNDLE" "$out/foreground" || status=1
    { echo "commit=$(cat "$BUNDLE/COMMIT" 2>/dev/null || echo not recorded)"
      echo "status=$([ $status -eq 0 ] && echo PASSED || echo FAILED)"
      date -u +"date=%Y-%m-%dT%H:%M:%SZ"
    } > "$out/run.txt"
    tar -C "$out" -czf "$out/logs.tar.gz" run.txt kernels backend example python user_path polite \
      first_answer fleet foreground
    echo "==== docs/performance inputs: OUTDIR/performance/<gpu>.json (deploy/perf_report.py)"
    python3 deploy/perf_report.py extract "$out" --into "$out/performance" ||
      echo "perf_report: extraction failed (the run's status is unchanged)"
    echo "==== deploy/gpu.sh run: $([ $status -eq 0 ] && echo PASSED || echo FAILED)"
    exit $status
    ;;
  *)
    sed -n 2,32p "$0"
    exit 2
    ;;
esac
