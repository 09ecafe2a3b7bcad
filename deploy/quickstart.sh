#!/usr/bin/env bash
# The quick start: installs the Debian packages, builds, starts the daemon (CUDA backend when a
# GPU is visible, the CPU backend otherwise), asks it for the best configuration of one problem
# twice (the first call tunes, the second is answered from the SQLite cache), then stops it.
#
#   deploy/quickstart.sh [ROWS COLS DTYPE]      default: 2048 2048 f32
set -euo pipefail
cd "$(dirname "$0")/.."
ROWS=${1:-2048}
COLS=${2:-2048}
DTYPE=${3:-f32}
BUILD_DIR=${BUILD_DIR:-build}

bash deploy/install-deps.sh
bash deploy/build.sh

RUN_DIR=$(mktemp -d /tmp/transposed-quickstart.XXXXXX)
DB=${DB:-$PWD/quickstart.db}
echo
echo "== starting transposed (db: $DB, log: $RUN_DIR/transposed.log)"
"$BUILD_DIR/bin/transposed" --listen 127.0.0.1:0 --port-file "$RUN_DIR/port" --db "$DB" \
  --backend auto --log-file "$RUN_DIR/transposed.log" &
PID=$!
trap 'kill -TERM $PID 2>/dev/null; wait $PID 2>/dev/null || true' EXIT
# Up to 60 s: with --backend auto on a GPU node the daemon first starts one worker per GPU.
for _ in $(seq 1 600); do
  [ -s "$RUN_DIR/port" ] && break
  kill -0 $PID 2>/dev/null || { cat "$RUN_DIR/transposed.log" >&2; exit 1; }
  sleep 0.1
done
[ -s "$RUN_DIR/port" ] || { echo "transposed did not start; log:" >&2; cat "$RUN_DIR/transposed.log" >&2; exit 1; }
SERVER=127.0.0.1:$(cat "$RUN_DIR/port")
CTL=("$BUILD_DIR/bin/transposectl" --server "$SERVER")

echo "== devices"
"${CTL[@]}" devices
echo
echo "== first request: $ROWS x $COLS $DTYPE (a miss: the daemon tunes)"
"${CTL[@]}" get --rows "$ROWS" --cols "$COLS" --dtype "$DTYPE"
echo
echo "== second request: the same problem (answered from the cache)"
"${CTL[@]}" get --rows "$ROWS" --cols "$COLS" --dtype "$DTYPE"
echo
echo "== daemon log"
cat "$RUN_DIR/transposed.log"
