#!/usr/bin/env bash
# One command for the GPU machine: the CUDA backend's tests and the search evaluation.
#   tuner/cuda/run_gpu.sh BUNDLE OUTDIR
# BUNDLE is a folder made by /work/shared/tools/bundle holding transposed-worker,
# transposed-worker-faults, transposed-fake-worker, worker_test, cuda_worker_test,
# cuda_backend_test, tune_eval, transposed and transposectl.
# OUTDIR receives: device.log, unit.log, gpu_test.log, e2e.log, e2e.csv, daemon.log,
# tune_eval.csv, tune_eval.log, tune_random.csv, tune_random.log (tune_eval --random RANDOM_TUNE_N,
# default 10, fresh seed unless SEED is set). Exit status non-zero if anything failed.
set -uo pipefail
bundle=$(cd "${1:?usage: run_gpu.sh BUNDLE OUTDIR}" && pwd)
out=${2:?usage: run_gpu.sh BUNDLE OUTDIR}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
export LD_LIBRARY_PATH="$bundle/lib:${CUDA_HOME:-/usr/local/cuda}/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export TRANSPOSED_WORKER="$bundle/bin/transposed-worker"
export TRANSPOSED_WORKER_FAULTS="$bundle/bin/transposed-worker-faults"
export TRANSPOSED_FAKE_WORKER="$bundle/bin/transposed-fake-worker"
status=0
{
  date -u +"date: %Y-%m-%dT%H:%M:%SZ"
  nvidia-smi --query-gpu=name,uuid,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem,clocks.max.mem,temperature.gpu,power.draw \
    --format=csv 2>&1
  echo "worker --list: $("$bundle/bin/transposed-worker" --list)"
} | tee "$out/device.log"

echo "== worker_test, cuda_worker_test"
{ timeout 120 "$bundle/bin/worker_test" && timeout 120 "$bundle/bin/cuda_worker_test"; } \
  > "$out/unit.log" 2>&1 || status=1
grep -E "^\[  (FAILED|PASSED) " "$out/unit.log"
echo "== cuda_backend_test"
timeout 300 "$bundle/bin/cuda_backend_test" > "$out/gpu_test.log" 2>&1 || status=1
grep -E "^\[  (FAILED|PASSED) |^device:|checked|ratio|fault recorded|tune with fault|Failure|error" \
  "$out/gpu_test.log" | head -40
echo "== cuda_e2e_test"
timeout 300 "$here/cuda_e2e_test.sh" "$bundle/bin" "$out" > "$out/e2e.log" 2>&1 || status=1
cat "$out/e2e.log" | tail -15
echo "== tune_eval"
timeout 400 "$bundle/bin/tune_eval" --csv "$out/tune_eval.csv" > /dev/null 2> "$out/tune_eval.log" || status=1
column -s, -t < "$out/tune_eval.csv" 2>/dev/null | cut -c1-250 || cat "$out/tune_eval.csv"
grep -v "invalid:" "$out/tune_eval.log" | tail -5
echo "invalid candidate results in tune_eval: $(grep -c 'invalid:' "$out/tune_eval.log")"
echo "== daemon answers vs the exhaustive winners of tune_eval (same problems)"
# e2e.csv: label (the problem with '_' for ' '), variant, gbps...; tune_eval.csv: problem, ...,
# exhaustive_best (10), exhaustive_best_gbps (11). The daemon's pick must reach 95% of the winner.
awk -F, 'NR==FNR { if (FNR > 1) { best[$1] = $11; bestv[$1] = $10 } next }
         FNR > 1 { p = $1; gsub("_", " ", p); if (!(p in best)) next;
                   pct = 100 * $3 / best[p]; ok = pct >= 95;
                   printf "%s: daemon %s %.1f GB/s, exhaustive %s %.1f GB/s, %.1f%% %s\n",
                          p, $2, $3, bestv[p], best[p], pct, ok ? "ok" : "FAIL";
                   if (!ok) bad = 1 }
         END { exit bad }' "$out/tune_eval.csv" "$out/e2e.csv" | tee "$out/compare.log" || status=1
echo "== tune_eval --random ${RANDOM_TUNE_N:-10}"
timeout 420 "$bundle/bin/tune_eval" --random "${RANDOM_TUNE_N:-10}" ${SEED:+--seed "$SEED"} \
  --csv "$out/tune_random.csv" > /dev/null 2> "$out/tune_random.log" || status=1
column -s, -t < "$out/tune_random.csv" 2>/dev/null | cut -c1-250 || cat "$out/tune_random.csv"
grep -v "invalid:" "$out/tune_random.log" | tail -8
exit $status
