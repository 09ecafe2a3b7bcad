#!/usr/bin/env bash
# On a machine with two GPUs of one class: issue 26 item 3 (python/bench/fleet_gpu.py), an idle
# node tunes the problems a busy node misses:
#   python/bench/fleet_gpu.sh BUNDLE OUTDIR
# A redis-server (the bundle's) on a free port of 127.0.0.1 without persistence, two daemons
# sharing it, each with its own temporary SQLite: the idle node on GPU 1, the busy node on GPU 0
# (CUDA_VISIBLE_DEVICES), where a torch job streams memory and asks the busy node for new
# problems under ANSWER_NOW. OUTDIR receives fleet.json, busy.daemon.log, idle.daemon.log,
# redis.log and run.log; fleet.json sets the single-node polite stage's figures of the same run
# (OUTDIR/../polite/duty.json, deploy/gpu.sh runs it first) beside the fleet's. With fewer than
# two GPUs it says "skipped: needs 2 GPUs" and exits 0. Exit status non-zero when a promise
# fails (fleet_gpu.py), or when redis-server or a daemon does not start or stop cleanly.
set -uo pipefail
bundle=$(cd "${1:?usage: fleet_gpu.sh BUNDLE OUTDIR}" && pwd)
out=${2:?usage: fleet_gpu.sh BUNDLE OUTDIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
exec > >(tee "$out/run.log") 2>&1
gpus=$(nvidia-smi --query-gpu=uuid --format=csv,noheader 2>/dev/null | grep -c '^GPU-')
if [ "$gpus" -lt 2 ]; then
  echo "fleet_gpu.sh: skipped: needs 2 GPUs (this machine has $gpus)"
  exit 0
fi
nvidia-smi --query-gpu=index,name,uuid,driver_version,memory.total --format=csv
if [ ! -x "$bundle/bin/redis-server" ]; then
  echo "fleet_gpu.sh: FAILED: no redis-server in $bundle (deploy/gpu.sh bundle puts it there)"
  exit 1
fi

# A free port (bound to port 0, then released), as testing/redis_process.cc picks one.
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
  echo "fleet_gpu.sh: FAILED: redis-server did not answer on 127.0.0.1:$port"
  cat "$out/redis.log" 2>/dev/null
  exit 1
fi
store=(--daemon-arg --shared-store --daemon-arg "redis://127.0.0.1:$port")

# The idle node (GPU 1) around the busy node (GPU 0) around the job: each with_daemon sets
# TRANSPOSED_SERVER for what it runs, so the outer one's address is handed on as
# FLEET_IDLE_SERVER.
polite_json=$(cd "$out/.." && pwd)/polite/duty.json
CUDA_VISIBLE_DEVICES=1 "$bundle/run" with_daemon --copy-log "$out/idle.daemon.log" \
  --daemon "$bundle/bin/transposed" --backend cuda --tune-budget 10 "${store[@]}" -- \
  sh -c 'export FLEET_IDLE_SERVER="$TRANSPOSED_SERVER" CUDA_VISIBLE_DEVICES=0; exec "$@"' sh \
  "$bundle/run" with_daemon --copy-log "$out/busy.daemon.log" \
  --daemon "$bundle/bin/transposed" --backend cuda --tune-budget 10 "${store[@]}" -- \
  env -u LD_LIBRARY_PATH PYTHONPATH="$bundle/python:$here" PYTHONUNBUFFERED=1 \
  FLEET_OUT="$out/fleet.json" FLEET_POLITE_JSON="$polite_json" python3 "$here/fleet_gpu.py"
status=$?
if [ -f "$out/fleet.json" ]; then
  python3 - "$out/fleet.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(f"fleet: measured on {sorted(set(str(v) for v in r['measured_on'].values()))}; all stored on "
      f"the busy node {r['all_stored_after_ask_s']} s after the ask; job loss "
      f"{r['loss_mean_pct']:.2f}% ({r['with_fleet_gbps_mean']:.0f} vs {r['alone_gbps_mean']:.0f} GB/s)")
p = r.get("single_node_polite")
if p:
    print(f"single node (polite stage, same run): job loss {p['loss_mean_pct']:.2f}%, all stored "
          f"{p['all_stored_after_ask_s']} s after the ask ({p['all_stored_after_idle_s']} s after "
          f"the job went idle)")
h = r.get("health")
if h:
    for name, d in h["devices"].items():
        print(f"health: {name}: slow={d['slow']} verdicts={d['verdicts']} "
              f"ceiling/class min={min(d['ceiling_ratios'], default=0):.3f} "
              f"max={max(d['ceiling_ratios'], default=0):.3f}")
PY
fi
echo "python/bench/fleet_gpu.sh: status $status"
exit $status
