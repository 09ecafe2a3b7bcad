#!/bin/bash
# The Slurm prolog recipe (transposed-prolog.sh) against a real daemon (run under
# testing/with_daemon, which sets TRANSPOSED_SERVER):
#   prolog_test.sh PATH/TO/transposectl
# A user's recorded shapes are pre-tuned by the prolog (they were misses, then are hits); a user
# with no shapes file and an unreachable daemon both leave the prolog exiting 0 (a failing
# prolog drains the node).
set -euo pipefail
ctl=$1
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cat > "$dir/alice.txt" <<'SHAPES'
# recorded by the previous run
72 56 f32
48 40 u8 2
{"rows":40,"cols":24,"dtype":"f64","exactness":"EXACTNESS_VALUE"}
SHAPES
hit() { "$ctl" --server "$TRANSPOSED_SERVER" get --cache-only --rows "$1" --cols "$2" --dtype "$3" "${@:4}" > /dev/null 2>&1; }
for p in "72 56 f32" "48 40 u8 --batch 2" "40 24 f64 --value-exact"; do
  # shellcheck disable=SC2086
  if hit $p; then echo "FAIL: $p is cached before the prolog"; exit 1; fi
done
SLURM_JOB_USER=alice SLURM_JOB_ID=7 TRANSPOSED_SHAPES_DIR=$dir TRANSPOSECTL=$ctl \
  bash "$here/transposed-prolog.sh"
for p in "72 56 f32" "48 40 u8 --batch 2" "40 24 f64 --value-exact"; do
  # shellcheck disable=SC2086
  if ! hit $p; then echo "FAIL: $p is not cached after the prolog"; exit 1; fi
done
# No shapes for this user: nothing to do, exit 0.
SLURM_JOB_USER=bob TRANSPOSED_SHAPES_DIR=$dir TRANSPOSECTL=$ctl bash "$here/transposed-prolog.sh"
# The daemon unreachable: the job still starts.
SLURM_JOB_USER=alice TRANSPOSED_SHAPES_DIR=$dir TRANSPOSECTL=$ctl TRANSPOSED_SERVER=127.0.0.1:1 \
  TRANSPOSED_PROLOG_TIMEOUT=20 bash "$here/transposed-prolog.sh"
echo "prolog_test: PASSED"
