#!/usr/bin/env bash
# CTest ctest_skips_test: deploy/ctest-skips.sh lists a skipped test after CTest's "100% tests
# passed" and fails with $CI set; a clean run passes either way.
set -euo pipefail
script=$(dirname "$0")/ctest-skips.sh
fail() { echo "ctest_skips_test: FAILED: $*" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/skipped.log" <<'LOG'
 3/5 Test  #3: completion_test ..................***Skipped   0.05 sec
100% tests passed, 0 tests failed out of 5

The following tests did not run:
	  3 - completion_test (Skipped)
	  4 - kubernetes_manifests (Skipped)
LOG
printf '100%% tests passed, 0 tests failed out of 5\n' > "$work/clean.log"
out=$(env -u CI bash "$script" "$work/skipped.log") || fail "without CI a skip must not fail"
grep -q "2 tests were SKIPPED" <<< "$out" || fail "the skips are not listed: $out"
grep -q "completion_test (Skipped)" <<< "$out" || fail "completion_test is not named: $out"
CI=true bash "$script" "$work/skipped.log" > /dev/null 2>&1 && fail "with CI a skip must fail"
CI=true bash "$script" "$work/clean.log" > "$work/out" || fail "a clean run failed"
[ ! -s "$work/out" ] || fail "a clean run printed: $(cat "$work/out")"
echo "ctest_skips_test: passed"
