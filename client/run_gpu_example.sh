#!/usr/bin/env bash
# On a GPU machine: the daemon with the CUDA backend, driven by transposectl and by the example
# batch job (which launches the answered configuration through the kernel library and checks it).
#   client/run_gpu_example.sh BUNDLE OUTDIR
# BUNDLE is a folder made by /work/shared/tools/bundle holding transposed, transposed-worker,
# transposectl and example_batch_job. OUTDIR receives daemon.log and run.log. Exit status non-zero
# if anything failed.
set -uo pipefail
bundle=$(cd "${1:?usage: run_gpu_example.sh BUNDLE OUTDIR}" && pwd)
out=${2:?usage: run_gpu_example.sh BUNDLE OUTDIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
export LD_LIBRARY_PATH="$bundle/lib:${CUDA_HOME:-/usr/local/cuda}/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
work=$(mktemp -d)
status=0
exec > >(tee "$out/run.log") 2>&1

nvidia-smi --query-gpu=name,uuid,driver_version,memory.total --format=csv
"$bundle/bin/transposed" --listen 127.0.0.1:0 --port-file "$work/port" --db "$work/cache.db" \
  --backend cuda --worker "$bundle/bin/transposed-worker" --log-file "$out/daemon.log" \
  --log-level info &
daemon=$!
for _ in $(seq 600); do [ -s "$work/port" ] && break; sleep 0.1; done
[ -s "$work/port" ] || { echo "FAIL: the daemon did not start"; cat "$out/daemon.log"; exit 1; }
server=127.0.0.1:$(cat "$work/port")
ctl() { "$bundle/bin/transposectl" --server "$server" "$@"; }
step() {
  echo "== $*"
  "$@" || { echo "FAIL ($?): $*"; status=1; }
}

step ctl devices
step ctl get --rows 4096 --cols 4096 --dtype f32
step ctl --json get --rows 4096 --cols 4096 --dtype f32
step ctl tune --rows 1000 --cols 3000 --dtype f16 --budget 10
for args in "--rows 4096 --cols 4096 --dtype f32" "--rows 1000 --cols 3000 --dtype f16" \
            "--rows 777 --cols 513 --dtype i8" "--rows 64 --cols 8192 --dtype f64 --batch 3" \
            "--rows 8192 --cols 8 --dtype f32" "--rows 300 --cols 200 --dtype c128"; do
  # shellcheck disable=SC2086
  step "$bundle/bin/example_batch_job" --server "$server" $args
done
step ctl list
kill -TERM "$daemon"
wait "$daemon" || { echo "FAIL: the daemon exited with $?"; status=1; }
grep -c "tune start" "$out/daemon.log" | sed 's/^/tunes started: /'
rm -rf "$work"
echo "status: $status"
exit $status
