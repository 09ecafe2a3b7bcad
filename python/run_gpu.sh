#!/usr/bin/env bash
# On a GPU machine: the Python package end to end (python/tests/test_gpu.py) against the daemon
# with the CUDA backend, started by the shared test helper (with_daemon).
#   python/run_gpu.sh BUNDLE OUTDIR
# BUNDLE is a folder made by deploy/gpu.sh bundle (bin/transposed, bin/transposed-worker,
# bin/with_daemon, python/ = the package with its stubs and libtransposed_launch.so). Needs a
# python3 with torch and grpcio. OUTDIR receives run.log, daemon.log and python_gpu.json.
set -uo pipefail
bundle=$(cd "${1:?usage: run_gpu.sh BUNDLE OUTDIR}" && pwd)
out=${2:?usage: run_gpu.sh BUNDLE OUTDIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
exec > >(tee "$out/run.log") 2>&1
nvidia-smi --query-gpu=name,uuid,driver_version,memory.total --format=csv
# The daemon needs the bundle's libraries; the Python process must not see them (torch brings its
# own libstdc++ and CUDA runtime), hence env -u LD_LIBRARY_PATH for it.
"$bundle/run" with_daemon --copy-log "$out/daemon.log" --daemon "$bundle/bin/transposed" \
  --backend cuda --tune-budget 20 -- \
  env -u LD_LIBRARY_PATH PYTHONPATH="$bundle/python" PYTHONUNBUFFERED=1 \
  TRANSPOSED_GPU_TEST_OUT="$out" python3 "$here/tests/test_gpu.py"
status=$?
echo "python/run_gpu.sh: status $status"
exit $status
