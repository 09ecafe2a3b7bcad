#!/usr/bin/env bash
# The quick start: installs the Debian packages building and running need (package and build
# output go to log files), builds, starts the daemon (CUDA backend when a GPU is visible, the CPU
# backend otherwise), asks it for the best configuration of one problem twice (the first call
# tunes, unless quickstart.db has it from an earlier run, which it then says; the second is
# answered from the SQLite cache), then stops it. It builds only what it runs (the `programs`
# target: transposed, transposectl and, with CUDA, transposed-worker; a new build directory is
# configured with the tests off, deploy/test.sh turns them on) and ends with the commands that
# start a daemon and ask it, as they work from the repository root (deploy/quickstart-test.sh runs
# them as printed).
#
#   deploy/quickstart.sh [ROWS COLS DTYPE]      default: 2048 2048 f32
set -euo pipefail
cd "$(dirname "$0")/.."
ROWS=${1:-2048}
COLS=${2:-2048}
DTYPE=${3:-f32}
BUILD_DIR=${BUILD_DIR:-build}

RUN_DIR=$(mktemp -d /tmp/transposed-quickstart.XXXXXX)
bash deploy/install-deps.sh --build-only
echo "== building into $BUILD_DIR (log: $RUN_DIR/build.log)"
start=$SECONDS
# A new build directory: no tests (deploy/test.sh builds them); an existing one keeps its setting.
config=()
[ -f "$BUILD_DIR/CMakeCache.txt" ] || config=(-DTRANSPOSED_BUILD_TESTING=OFF)
if ! TARGETS=programs bash deploy/build.sh ${config[@]+"${config[@]}"} > "$RUN_DIR/build.log" 2>&1; then
  tail -40 "$RUN_DIR/build.log" >&2
  echo "quickstart: the build failed (log: $RUN_DIR/build.log)" >&2
  exit 1
fi
echo "   built in $((SECONDS - start)) s"

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
# The first answer says where it came from: a tune now, or the cache of an earlier run.
first=$("${CTL[@]}" get --rows "$ROWS" --cols "$COLS" --dtype "$DTYPE")
case "$(sed -n 's/^ *source: *\([a-z_]*\).*/\1/p' <<< "$first" | head -1)" in
  tuned) label="a miss: the daemon tuned it" ;;
  cache) label="answered from the cache: $(basename "$DB") has it from an earlier run; delete it to tune again" ;;
  *) label="see its source" ;;
esac
echo "== first request: $ROWS x $COLS $DTYPE ($label)"
echo "$first"
echo
echo "== second request: the same problem (answered from the cache)"
"${CTL[@]}" get --rows "$ROWS" --cols "$COLS" --dtype "$DTYPE"
echo
echo "== daemon log"
cat "$RUN_DIR/transposed.log"
kill -TERM $PID 2>/dev/null; wait $PID 2>/dev/null || true
trap - EXIT

# The commands to go on with, exactly as they work from here (the daemon's default address
# 127.0.0.1:50051 is transposectl's default too).
B=$BUILD_DIR/bin
[ "$DB" = "$PWD/quickstart.db" ] && db=quickstart.db || db=$DB
echo
echo "== next: start a daemon and ask it (from $PWD; docs/user/cli.md)"
echo "$B/transposed --db $db --log-file transposed.log & sleep 2   # serves 127.0.0.1:50051"
echo "$B/transposectl get --rows $ROWS --cols $COLS --dtype $DTYPE          # from the cache now"
echo "$B/transposectl get --rows 1024 --cols 768 --dtype f16          # a miss: tunes it"
echo "$B/transposectl list"
echo "kill %1                                                   # stops the daemon"
