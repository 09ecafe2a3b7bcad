#!/usr/bin/env bash
# Runs the quick start (deploy/quickstart.sh) twice against one fresh database, as a new user
# would and then again, and checks what it promises: it installs only what building and running
# need (install-deps --build-only: no node/npm, no validator packages), its output is short (no
# package or build progress; at most 80 lines), the first run's first request is a tune and is
# headed so, the second run's first request is answered from the cache and headed so (not "a
# miss"), and every CPU ratio is at most 1.05 unless the answer is flagged noisy (the ceiling is
# this machine's fastest copy). The first run builds only what the quick start runs: no test
# program is built when the build directory is new. Then the commands of its last lines ("== next")
# are run exactly as printed, from the repository root (in a network namespace of their own when
# `unshare` and `ip` allow it, so that the daemon's default port 50051 is free): the daemon starts,
# the quick start's problem is a cache hit, a new one is tuned, and `kill %1` stops the daemon.
# CI (.ci/run) runs it after the tests; the build is already there, so it costs three tunes.
#
#   deploy/quickstart-test.sh [ROWS COLS DTYPE]      default: the quick start's 2048 2048 f32
set -euo pipefail
cd "$(dirname "$0")/.."
WORK=$(mktemp -d /tmp/transposed-quickstart-test.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
fail() { echo "quickstart-test: FAILED: $*" >&2; exit 1; }

if bash deploy/install-deps.sh --build-only --list | grep -Eqx 'nodejs|npm|clang'; then
  fail "install-deps --build-only lists test-only packages"
fi

fresh_build=0
[ -f "${BUILD_DIR:-build}/CMakeCache.txt" ] || fresh_build=1
for run in 1 2; do
  DB=$WORK/quickstart.db bash deploy/quickstart.sh "$@" > "$WORK/run$run.log" 2>&1 ||
    { cat "$WORK/run$run.log" >&2; fail "run $run of deploy/quickstart.sh exited non-zero"; }
  lines=$(wc -l < "$WORK/run$run.log")
  echo "quickstart-test: run $run: $lines lines"
  grep -q '^install-deps (build):' "$WORK/run$run.log" ||
    { cat "$WORK/run$run.log"; fail "run $run did not install with --build-only"; }
  if grep -Eq 'npm ci|manifest validator|Unpacking |Selecting previously|^\[[0-9]+/[0-9]+\]' \
      "$WORK/run$run.log"; then
    cat "$WORK/run$run.log"
    fail "run $run printed package or build progress"
  fi
  [ "$lines" -le 80 ] || { cat "$WORK/run$run.log"; fail "run $run printed $lines lines (> 80)"; }
  # The first request's heading and the source of its answer (the first `source:` line).
  heading=$(grep -m1 '^== first request' "$WORK/run$run.log")
  source=$(grep -m1 -E '^ *source: ' "$WORK/run$run.log" | awk '{print $2}')
  echo "quickstart-test: run $run: $heading / source: $source"
  if [ "$run" = 1 ]; then
    [ "$source" = tuned ] && grep -q 'a miss' <<< "$heading" ||
      { cat "$WORK/run$run.log"; fail "run 1: the first request should be a headed tune"; }
  else
    [ "$source" = cache ] && grep -q 'from the cache' <<< "$heading" && ! grep -q 'a miss' <<< "$heading" ||
      { cat "$WORK/run$run.log"; fail "run 2: the first request should be a headed cache answer"; }
  fi
  # CPU answers: the ratio is a share of this machine's copy bandwidth (noise allowed: 5 %; an
  # answer the daemon flags as noisy is not held to it).
  if [ "$run" = 1 ] && [ "$fresh_build" = 1 ]; then
    tests=$(find "${BUILD_DIR:-build}/bin" -name '*_test' -type f | wc -l)
    [ "$tests" -eq 0 ] || fail "run 1 built $tests test programs into a new build directory"
  fi
  if grep -Eq '^ *rel_spread:.*noisy' "$WORK/run$run.log"; then
    echo "quickstart-test: run $run: ratio not checked (the answer is flagged noisy)"
  elif grep -Eq '^ *backend: +cpu' "$WORK/run$run.log"; then
    grep -E '^ *ratio: ' "$WORK/run$run.log" | awk '{print $2}' | while read -r r; do
      awk -v r="$r" 'BEGIN { exit !(r <= 1.05) }' || fail "run $run: CPU ratio $r > 1.05"
    done
  fi
done
# The last lines: the commands to go on with, run as printed.
sed -n '/^== next:/,$p' "$WORK/run2.log" | tail -n +2 > "$WORK/next.sh"
echo "quickstart-test: the printed commands:"
sed 's/^/    /' "$WORK/next.sh"
[ "$(tail -1 "$WORK/run2.log")" = "$(tail -1 "$WORK/next.sh")" ] && [ -s "$WORK/next.sh" ] ||
  fail "the quick start does not end with the commands to go on with"
had_log=0
[ -e transposed.log ] && had_log=1
runner=(bash -e)
if command -v unshare >/dev/null && command -v ip >/dev/null && unshare -rn true 2>/dev/null; then
  runner=(unshare -rn bash -ec 'ip link set lo up && bash -e "$0"')
elif ss -ltn 2>/dev/null | grep -q ':50051 '; then
  fail "port 50051 is taken and no network namespace is available to run the printed commands"
fi
"${runner[@]}" "$WORK/next.sh" > "$WORK/next.log" 2>&1 ||
  { cat "$WORK/next.log"; [ -e transposed.log ] && cat transposed.log; fail "the printed commands failed"; }
[ "$had_log" = 1 ] || rm -f transposed.log
sed 's/^/    /' "$WORK/next.log"
sources=$(grep -E '^ *source: ' "$WORK/next.log" | awk '{print $2}' | tr '\n' ' ')
[ "$sources" = "cache tuned " ] ||
  fail "the printed commands answered '$sources' (want a cache hit, then a tune)"
grep -Eq '^2 entries' "$WORK/next.log" || fail "the printed list did not show the 2 entries"
echo "quickstart-test: passed"
