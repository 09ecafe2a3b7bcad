#!/usr/bin/env bash
# Checks the clang-format style (.clang-format) of the C++ lines a change touched, and only those:
# `git clang-format --diff BASE HEAD`, so a file or a line the change did not touch never fails it
# (most of the tree predates the check). Exit 1 with the diff that would fix it
# (fix: git clang-format BASE, then commit).
#   deploy/format-check.sh [BASE]   BASE: the commit the change starts from; default $FORMAT_BASE,
#                                   else the merge base of HEAD and origin/main (nothing to check
#                                   when HEAD is that commit: a clone of main itself).
# Run by .ci/run; test: deploy/format_check_test.sh.
set -euo pipefail
cd "${FORMAT_CHECK_DIR:-$(dirname "$0")/..}"
base=${1:-${FORMAT_BASE:-}}
if [ -z "$base" ]; then
  if ! git rev-parse -q --verify origin/main >/dev/null; then
    echo "format-check: no BASE given and no origin/main: nothing to compare with"
    exit 0
  fi
  base=$(git merge-base HEAD origin/main)
fi
if [ "$(git rev-parse HEAD)" = "$(git rev-parse "$base^{commit}")" ]; then
  echo "format-check: HEAD is the base ($base): no change to check"
  exit 0
fi
tool=$(command -v git-clang-format || command -v git-clang-format-14 || true)
if [ -z "$tool" ]; then
  echo "format-check: git-clang-format not found (deploy/install-deps.sh --ci installs clang-format)" >&2
  exit 1
fi
out=$("$tool" --diff --extensions h,cc,cu,cuh "$base" HEAD 2>&1)
case "$out" in
  "" | "no modified files to format" | "clang-format did not modify any files")
    echo "format-check: the C++ lines changed since $(git rev-parse --short "$base") are formatted"
    exit 0
    ;;
esac
printf '%s\n' "$out"
echo "format-check: the C++ lines above, changed since $(git rev-parse --short "$base"), are not" \
  "formatted (fix: git clang-format $(git rev-parse --short "$base"), then commit)" >&2
exit 1
