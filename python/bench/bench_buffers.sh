#!/usr/bin/env bash
# On a GPU machine: bench_buffers.py (the same prepared kernel on buffers from PyTorch's caching
# allocator, cuMemAlloc, and cuMemCreate in 2 MiB chunks or whole; random or constant input)
# under PyTorch's default allocator settings, with expandable segments off and on, with the GPU's
# clocks, power and clock-event reasons sampled every 100 ms meanwhile (issue 21 item 4).
#   python/bench/bench_buffers.sh BUNDLE OUTDIR
# BUNDLE: made by deploy/gpu.sh bundle (python/ with libtransposed_launch.so). Needs python3 with
# torch. OUTDIR receives buffers_<setting>.jsonl, clocks.csv and bench_buffers.log.
set -uo pipefail
bundle=$(cd "${1:?usage: bench_buffers.sh BUNDLE OUTDIR}" && pwd)
out=${2:?usage: bench_buffers.sh BUNDLE OUTDIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
exec > >(tee "$out/bench_buffers.log") 2>&1
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.max.sm,clocks.max.mem,power.limit \
  --format=csv
q=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active
nvidia-smi --query-gpu=$q --format=csv -c 1 > /dev/null 2>&1 ||
  q=${q%,clocks_event_reasons.active},clocks_throttle_reasons.active
nvidia-smi --query-gpu=$q --format=csv -lms 100 > "$out/clocks.csv" 2>&1 &
smi=$!
status=0
run() {  # NAME PYTORCH_CUDA_ALLOC_CONF ARGS...
  local name=$1 conf=$2
  shift 2
  echo "== $name (PYTORCH_CUDA_ALLOC_CONF=${conf:-unset})"
  local lib="$bundle/python/transposed/libtransposed_launch.so"
  env -u LD_LIBRARY_PATH ${conf:+PYTORCH_CUDA_ALLOC_CONF=$conf} PYTHONPATH="$bundle/python" \
    PYTHONUNBUFFERED=1 TRANSPOSED_LAUNCH_LIBRARY="$lib" \
    python3 "$here/bench_buffers.py" --out "$out/buffers_$name.jsonl" "$@" || status=1
}
run default "" --sources torch torch_churn
run expandable_off "expandable_segments:False"
run expandable_on "expandable_segments:True" --sources torch torch_churn
kill "$smi" 2>/dev/null
wait "$smi" 2>/dev/null
echo "bench_buffers.sh: status $status"
exit $status
