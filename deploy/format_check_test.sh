#!/usr/bin/env bash
# Test of deploy/format-check.sh in a scratch git repository: a badly formatted line the change
# touched fails it; a badly formatted file the change did not touch, and a clone of the base
# itself, pass. Exit 77 (skipped) without git-clang-format.
set -euo pipefail
script="$(cd "$(dirname "$0")" && pwd)/format-check.sh"
command -v git-clang-format >/dev/null || command -v git-clang-format-14 >/dev/null || exit 77
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir"
git init -q -b main .
git config user.email t@example.com
git config user.name test
printf 'BasedOnStyle: Google\nColumnLimit: 100\n' >.clang-format
printf 'int  untouched( ) {return 1;}\n' >old.cc  # badly formatted, never changed
git add -A && git commit -qm base
base=$(git rev-parse HEAD)
fail() { echo "format_check_test: $*" >&2; exit 1; }

FORMAT_CHECK_DIR=$dir bash "$script" "$base" >/dev/null || fail "HEAD == base must pass"
printf 'int Good() { return 2; }\n' >good.cc
git add -A && git commit -qm good
FORMAT_CHECK_DIR=$dir bash "$script" "$base" >/dev/null ||
  fail "a formatted change beside an untouched unformatted file must pass"
printf 'int   Bad( ){return 3;}\n' >bad.cc
git add -A && git commit -qm bad
if FORMAT_CHECK_DIR=$dir bash "$script" "$base" >out.txt 2>&1; then
  cat out.txt
  fail "an unformatted changed line must fail"
fi
grep -q "bad.cc" out.txt || fail "the failure must show the file: $(cat out.txt)"
echo "format_check_test: ok"
