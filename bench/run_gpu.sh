#!/usr/bin/env bash
# One command for the GPU machine: the GPU correctness test, compute-sanitizer (memcheck and
# racecheck) on the small-shape subset, the benchmark and its plot, and the benchmark's random
# mode (RANDOM_N problems, default 25, from a fresh seed unless SEED is set; the seed is printed),
# then answer_eval on this run's measurements: the ANSWER_NOW answer against the measured winner
# of each fresh random and listed problem, with the other problems stored, 4 of them, none.
#   bench/run_gpu.sh BUNDLE OUTDIR
# BUNDLE is a folder made by /work/shared/tools/bundle holding kernels_gpu_test,
# transpose_bench and answer_eval (BUNDLE/run NAME ARGS runs them); OUTDIR receives:
#   gpu_test.log, sanitizer.log, bench.log, bench.csv, bench_all.csv, bench.png,
#   random.log, random.csv, random_all.csv, answer_eval.log
# Exit status: non-zero if the test, a sanitizer or the benchmark's checks failed.
set -uo pipefail
bundle=${1:?usage: run_gpu.sh BUNDLE OUTDIR}
out=${2:?usage: run_gpu.sh BUNDLE OUTDIR}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
status=0

{
  date -u +"date: %Y-%m-%dT%H:%M:%SZ"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem \
    --format=csv 2>&1
  ls /usr/local/cuda/lib64/ 2>/dev/null | grep -E '^libcublas\.so' | head -3
} > "$out/bench.log"

echo "== kernels_gpu_test"
"$bundle/run" kernels_gpu_test 2>&1 | tee "$out/gpu_test.log" | tail -25 || status=1

: > "$out/sanitizer.log"
if command -v compute-sanitizer >/dev/null; then
  for tool in memcheck racecheck; do
    echo "== compute-sanitizer --tool $tool (KernelsGpuSmall.*)" | tee -a "$out/sanitizer.log"
    timeout 240 compute-sanitizer --tool "$tool" --error-exitcode 3 "$bundle/run" \
      kernels_gpu_test --gtest_filter='KernelsGpuSmall.*' >> "$out/sanitizer.log" 2>&1
    rc=$?
    echo "== $tool exit status $rc" | tee -a "$out/sanitizer.log"
    tail -4 "$out/sanitizer.log"
    [ $rc -eq 0 ] || status=1
  done
else
  echo "compute-sanitizer not found" | tee -a "$out/sanitizer.log"
  status=1
fi

echo "== transpose_bench"
"$bundle/run" transpose_bench --csv "$out/bench.csv" --all-csv "$out/bench_all.csv" \
  2>&1 | tee -a "$out/bench.log" || status=1

python3 "$here/plot.py" "$out/bench.csv" "$out/bench.png" || echo "plot failed"

echo "== transpose_bench --random ${RANDOM_N:-25}"
"$bundle/run" transpose_bench --random "${RANDOM_N:-25}" ${SEED:+--seed "$SEED"} \
  --csv "$out/random.csv" --all-csv "$out/random_all.csv" > "$out/random.log" 2>&1 || status=1
grep -E "^random mode|^cuBLAS|^device" "$out/random.log"
sed -n '/^problem /,$p' "$out/random.log"

# Quality figures, not a pass/fail check (the unit test answer_eval_test holds the target on the
# committed samples); a missing or unreadable CSV fails the run.
echo "== answer_eval: the ANSWER_NOW answer / the measured winner (random and listed problems)"
: > "$out/answer_eval.log"
for store in "" "--store 4 --seed 1" "--store 0"; do
  # shellcheck disable=SC2086
  "$bundle/run" answer_eval $store "$out/random_all.csv" "$out/bench_all.csv" \
    >> "$out/answer_eval.log" 2>&1 || status=1
done
grep "^answer_eval:" "$out/answer_eval.log"
exit $status
