#!/usr/bin/env bash
# Validates deploy/kubernetes/*.yaml (CTest `kubernetes_manifests`, label unit):
#   deploy/kubernetes/validate/check.sh [PATH/TO/transposed]
# With the daemon binary, every flag the manifests pass to it must be one it knows.
# The validator's npm packages are installed by deploy/install-deps.sh --ci (npm ci, pinned by
# package-lock.json; works offline afterwards).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# Outside CI (the quick start installs no node packages) a missing validator skips the check
# (exit 77, CTest's SKIP_RETURN_CODE); under CI ($CI set, .ci/run) it fails.
missing() {
  if [ -n "${CI:-}" ]; then
    echo "check.sh: $1 (run deploy/install-deps.sh --ci)" >&2
    exit 1
  fi
  echo "check.sh: SKIPPED: $1 (deploy/install-deps.sh --ci installs it)"
  exit 77
}
command -v node >/dev/null || missing "node is not installed"
[ -d "$here/node_modules/kubernetes-models" ] ||
  missing "the validator's packages are missing in $here/node_modules"
args=()
if [ $# -ge 1 ]; then
  help=$(mktemp)
  trap 'rm -f "$help"' EXIT
  "$1" --help > "$help"
  args=(--daemon-help "$help")
fi
exec node "$here/validate.mjs" "${args[@]}" "$here"/../*.yaml
