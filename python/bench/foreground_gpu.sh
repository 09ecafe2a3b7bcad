#!/usr/bin/env bash
# On a machine with two GPUs of one class: issue 33's foreground miss on a busy GPU
# (python/bench/foreground_gpu.py): a torch job streams memory on GPU 0 while `transposectl get`
# asks GPU 0's daemon for 3 new problems; GPU 1's daemon, sharing the same Redis, is idle.
#   python/bench/foreground_gpu.sh BUNDLE OUTDIR
# A redis-server (the bundle's) on a free port of 127.0.0.1 without persistence and two daemons
# with their own temporary SQLite, as python/bench/fleet_gpu.sh starts them (default
# --shared-store flags). OUTDIR receives foreground.json (the job's loss over the run and per
# 0.5 s window, each answer and where it was measured), busy.daemon.log, idle.daemon.log,
# redis.log and run.log. With fewer than two GPUs it says "skipped: needs 2 GPUs" and exits 0.
# Exit status non-zero when a promise fails (foreground_gpu.py), or when redis-server or a daemon
# does not start or stop cleanly.
set -uo pipefail
bundle=$(cd "${1:?usage: foreground_gpu.sh BUNDLE OUTDIR}" && pwd)
out=${2:?usage: foreground_gpu.sh BUNDLE OUTDIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
exec > >(tee "$out/run.log") 2>&1
gpus=$(nvidia-smi --query-gpu=uuid --format=csv,noheader 2>/dev/null | grep -c '^GPU-')
if [ "$gpus" -lt 2 ]; then
  echo "foreground_gpu.sh: skipped: needs 2 GPUs (this machine has $gpus)"
  exit 0
fi
nvidia-smi --query-gpu=index,name,uuid,driver_version,memory.total --format=csv
if [ ! -x "$bundle/bin/redis-server" ]; then
  echo "foreground_gpu.sh: FAILED: no redis-server in $bundle (deploy/gpu.sh bundle puts it there)"
  exit 1
fi

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
redis_dir=$(mktemp -d)
"$bundle/run" redis-server --bind 127.0.0.1 --port "$port" --save "" --appendonly no \
  --dir "$redis_dir" --logfile "$out/redis.log" &
redis_pid=$!
stop_redis() {
  kill "$redis_pid" 2>/dev/null && wait "$redis_pid" 2>/dev/null
  rm -rf "$redis_dir"
}
trap stop_redis EXIT
ping_redis() {
  python3 - "$port" <<'PY'
import socket, sys
try:
    s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=1)
    s.sendall(b"PING\r\n")
    sys.exit(0 if s.recv(16).startswith(b"+PONG") else 1)
except OSError:
    sys.exit(1)
PY
}
for _ in $(seq 50); do ping_redis && break; sleep 0.1; done
if ! ping_redis; then
  echo "foreground_gpu.sh: FAILED: redis-server did not answer on 127.0.0.1:$port"
  cat "$out/redis.log" 2>/dev/null
  exit 1
fi
store=(--daemon-arg --shared-store --daemon-arg "redis://127.0.0.1:$port")

# The idle node (GPU 1) around the busy node (GPU 0) around the job, as fleet_gpu.sh.
CUDA_VISIBLE_DEVICES=1 "$bundle/run" with_daemon --copy-log "$out/idle.daemon.log" \
  --daemon "$bundle/bin/transposed" --backend cuda --tune-budget 10 "${store[@]}" -- \
  sh -c 'export FLEET_IDLE_SERVER="$TRANSPOSED_SERVER" CUDA_VISIBLE_DEVICES=0; exec "$@"' sh \
  "$bundle/run" with_daemon --copy-log "$out/busy.daemon.log" \
  --daemon "$bundle/bin/transposed" --backend cuda --tune-budget 10 "${store[@]}" -- \
  env -u LD_LIBRARY_PATH PYTHONPATH="$bundle/python:$here" PYTHONUNBUFFERED=1 \
  TRANSPOSECTL="$bundle/run transposectl" FOREGROUND_OUT="$out/foreground.json" \
  python3 "$here/foreground_gpu.py"
status=$?
if [ -f "$out/foreground.json" ]; then
  python3 - "$out/foreground.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
where = {k: a.get("measured_on") for k, a in r["answers"].items()}
print(f"foreground: measured on {where}; job loss {r['loss_pct']:.2f}% over the run, worst 0.5 s "
      f"window {r['worst_window_loss_pct']:.1f}% ({r['with_gets_gbps_mean']:.0f} vs "
      f"{r['alone_gbps_mean']:.0f} GB/s); answers in "
      f"{[a.get('seconds') for a in r['answers'].values()]} s")
PY
fi
echo "python/bench/foreground_gpu.sh: status $status"
exit $status
