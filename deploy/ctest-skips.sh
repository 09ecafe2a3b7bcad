#!/usr/bin/env bash
# Reads CTest's output (a file, or stdin) and lists the tests that did not run ("Skipped": a test
# that found a tool it needs missing, exit 77; "Not Run"), which CTest's "100% tests passed" does
# not count as failures. Exit 0 when none; else the list on stdout and exit 0, or exit 1 with $CI
# set (.ci/run must run every test). deploy/test.sh runs it after CTest; CTest ctest_skips_test
# checks it on a sample.
#
#   deploy/ctest-skips.sh [CTEST_OUTPUT]
set -euo pipefail
skipped=$(grep -E '^[[:space:]]*[0-9]+ - .* \((Skipped|Not Run)\)' "${1:-/dev/stdin}" |
  sed -E 's/^[[:space:]]*[0-9]+ - //' || true)
[ -n "$skipped" ] || exit 0
echo
echo "deploy/test.sh: $(wc -l <<< "$skipped") tests were SKIPPED, not passed (install what they need: deploy/install-deps.sh --ci):"
sed 's/^/  /' <<< "$skipped"
if [ -n "${CI:-}" ]; then
  echo "deploy/test.sh: FAILED: CI (\$CI is set) must run every test" >&2
  exit 1
fi
