#!/usr/bin/env bash
# Validates deploy/kubernetes/*.yaml (CTest `kubernetes_manifests`, label unit):
#   deploy/kubernetes/validate/check.sh [PATH/TO/transposed]
# With the daemon binary, every flag the manifests pass to it must be one it knows.
# The validator's npm packages are installed by deploy/install-deps.sh (npm ci, pinned by
# package-lock.json; works offline afterwards).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
command -v node >/dev/null || { echo "check.sh: node is not installed (run deploy/install-deps.sh)" >&2; exit 1; }
if [ ! -d "$here/node_modules/kubernetes-models" ]; then
  echo "check.sh: the validator's packages are missing in $here/node_modules (run deploy/install-deps.sh)" >&2
  exit 1
fi
args=()
if [ $# -ge 1 ]; then
  help=$(mktemp)
  trap 'rm -f "$help"' EXIT
  "$1" --help > "$help"
  args=(--daemon-help "$help")
fi
exec node "$here/validate.mjs" "${args[@]}" "$here"/../*.yaml
