#!/usr/bin/env bash
# On a GPU machine: the daemon with the CUDA backend, driven by transposectl and by the example
# batch job (which launches the answered configuration through the kernel library and checks it).
#   client/run_gpu_example.sh BUNDLE OUTDIR
# BUNDLE is a folder made by /work/shared/tools/bundle holding transposed, transposed-worker,
# transposectl, example_batch_job and with_daemon. The shared test helper with_daemon (testing/)
# starts the daemon (fresh database, free port, the daemon's default tune budget of 20 s) and runs
# this script again against it (with EXAMPLE_UNDER_DAEMON set); the daemon must exit 0 on SIGTERM
# at the end. OUTDIR receives daemon.log and run.log. Exit status non-zero if anything failed.
set -uo pipefail
bundle=$(cd "${1:?usage: run_gpu_example.sh BUNDLE OUTDIR}" && pwd)
out=${2:?usage: run_gpu_example.sh BUNDLE OUTDIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)

if [ -z "${EXAMPLE_UNDER_DAEMON:-}" ]; then
  export LD_LIBRARY_PATH="$bundle/lib:${CUDA_HOME:-/usr/local/cuda}/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  exec > >(tee "$out/run.log") 2>&1
  nvidia-smi --query-gpu=name,uuid,driver_version,memory.total --format=csv
  EXAMPLE_UNDER_DAEMON=1 "$bundle/bin/with_daemon" --daemon "$bundle/bin/transposed" \
    --backend cuda --tune-budget 20 --daemon-arg --worker \
    --daemon-arg "$bundle/bin/transposed-worker" --copy-log "$out/daemon.log" -- \
    bash "$0" "$bundle" "$out"
  status=$?
  grep -c "tune start" "$out/daemon.log" | sed 's/^/tunes started: /'
  echo "status: $status"
  exit $status
fi

# Under with_daemon: TRANSPOSED_SERVER is the daemon's address.
status=0
server=$TRANSPOSED_SERVER
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
exit $status
