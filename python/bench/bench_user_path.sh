#!/usr/bin/env bash
# On a GPU machine: the user-path benchmark (issue 21): what a PyTorch (transposed.transpose) and
# a C++ (transposed::Transposer, transposer_bench) caller get against the bandwidth the daemon
# stored, torch's own x.t().contiguous() and clone(), host cost per call, cache-hit latency idle
# and during a tune. A fixed list plus RANDOM_N (default 4) seeded random shapes, a fresh seed each
# run unless SEED is set (printed). LEGACY=FILE: also time an earlier version's _launch.py (git
# show REV:python/transposed/_launch.py > FILE) side by side.
#   python/bench/bench_user_path.sh BUNDLE OUTDIR
# BUNDLE: made by deploy/gpu.sh bundle (transposed, transposed-worker, with_daemon,
# transposer_bench, python/). Needs python3 with torch and grpcio. OUTDIR receives bench.log,
# daemon.log, problems.txt, cpp.json, user_path.md (the table) and user_path.json. The script
# lives outside python/ so that python3 imports the bundle's package (PYTHONPATH), not the sources.
set -uo pipefail
bundle=$(cd "${1:?usage: bench_user_path.sh BUNDLE OUTDIR}" && pwd)
out=${2:?usage: bench_user_path.sh BUNDLE OUTDIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
here=$(cd "$(dirname "$0")" && pwd)

if [ -z "${BENCH_UNDER_DAEMON:-}" ]; then
  exec > >(tee "$out/bench.log") 2>&1
  seed=${SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
  echo "seed: $seed"
  q=name,uuid,driver_version,clocks.sm,clocks.max.sm,clocks.mem,clocks.max.mem,temperature.gpu,power.draw
  nvidia-smi --query-gpu=$q --format=csv
  BENCH_UNDER_DAEMON=1 SEED=$seed "$bundle/run" with_daemon --copy-log "$out/daemon.log" \
    --daemon "$bundle/bin/transposed" --backend cuda --tune-budget "${TUNE_BUDGET:-10}" -- \
    bash "$0" "$bundle" "$out"
  status=$?
  nvidia-smi --query-gpu=$q --format=csv,noheader
  echo "bench_user_path.sh: status $status"
  exit $status
fi

# Under with_daemon: TRANSPOSED_SERVER is the daemon's address.
py() {
  env -u LD_LIBRARY_PATH PYTHONPATH="$bundle/python" PYTHONUNBUFFERED=1 \
    TRANSPOSED_LAUNCH_LIBRARY="$bundle/python/transposed/libtransposed_launch.so" \
    python3 "$here/bench_user_path.py" "$@"
}
status=0
py --seed "$SEED" --random "${RANDOM_N:-4}" --budget "${TUNE_BUDGET:-10}" \
  --prepare "$out/problems.txt" || exit 1
echo "== C++: transposer_bench"
"$bundle/run" transposer_bench --server "$TRANSPOSED_SERVER" --problems "$out/problems.txt" \
  --json "$out/cpp.json" || status=1
echo "== Python: bench_user_path.py"
py --problems "$out/problems.txt" --cpp "$out/cpp.json" --out "$out" ${LEGACY:+--legacy "$LEGACY"} \
  || status=1
exit $status
