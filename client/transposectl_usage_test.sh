#!/usr/bin/env bash
# CTest transposectl_usage_test: transposectl's usage errors say what to do (issue 37). No daemon:
# a closed port on loopback.
#   client/transposectl_usage_test.sh PATH/TO/transposectl
set -uo pipefail
ctl=$1
fail() { echo "transposectl_usage_test: FAILED: $*" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# run ARGS... -> $out (stdout and stderr), $rc
run() { out=$("$ctl" "$@" 2>&1); rc=$?; }
expect() {  # expect RC TEXT ARGS...
  local want_rc=$1 want=$2
  shift 2
  run "$@"
  [ "$rc" = "$want_rc" ] || fail "transposectl $*: exit $rc, want $want_rc: $out"
  grep -qF -- "$want" <<< "$out" || fail "transposectl $*: no '$want' in: $out"
}
expect 2 "unknown flag '--rwos' (did you mean '--rows'?)" get --rwos 3 --cols 4 --dtype f32
expect 2 "unknown flag '--servr' (did you mean '--server'?)" --servr x devices
expect 2 "unknown command 'gett' (did you mean 'get'?)" gett --rows 4
expect 2 "--timeout: must be more than 0 seconds, got 0" --timeout 0 devices
grep -q '[0-9]\{20\}' <<< "$out" && fail "--timeout 0 printed a long number: $out"
expect 2 "--budget: must be at least 0 seconds, got -1" tune --budget -1 --from x
expect 2 "cannot read $work/absent: No such file or directory" tune --from "$work/absent"
expect 1 "cannot read $work/absent: No such file or directory" import "$work/absent"
expect 2 "cannot read $work/absent: No such file or directory" --token-file "$work/absent" devices
expect 3 "hint: no daemon listens there" --server 127.0.0.1:1 --timeout 5 devices
expect 0 "Usage: transposectl get" help get
[[ "$out" == *"/transposectl get"* ]] && fail "help shows a path: $out"
expect 0 "Usage: transposectl [OPTIONS] SUBCOMMAND" help
expect 0 "Usage: transposectl get" get --help
expect 0 "transposectl 0." version
expect 0 "transposectl 0." --version
echo "transposectl_usage_test: passed"
