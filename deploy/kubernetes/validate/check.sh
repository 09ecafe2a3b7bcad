#!/usr/bin/env bash
# Validates deploy/kubernetes/*.yaml and the Helm chart deploy/helm/transposed rendered by
# render.mjs with its defaults and with each of its ci/*-values.yaml (CTest
# `kubernetes_manifests`, label unit):
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
[ -d "$here/node_modules/@kubernetes-models/prometheus-operator" ] ||
  missing "the validator's package @kubernetes-models/prometheus-operator is missing (npm ci in $here)"
args=()
if [ $# -ge 1 ]; then
  help=$(mktemp)
  "$1" --help > "$help"
  args=(--daemon-help "$help")
fi
# The chart: render.mjs's own checks, then one render per values set, all through validate.mjs.
chart="$here/../../helm/transposed"
rendered=$(mktemp -d)
trap 'rm -rf "$rendered" ${help:+"$help"}' EXIT
node "$here/render_test.mjs"
node "$here/render.mjs" "$chart" --namespace transposed -o "$rendered/chart-defaults.yaml"
for values in "$chart"/ci/*-values.yaml; do
  node "$here/render.mjs" "$chart" --namespace transposed -f "$values" \
    -o "$rendered/chart-$(basename "$values" .yaml).yaml"
done
node "$here/validate.mjs" "${args[@]}" "$here"/../*.yaml "$rendered"/*.yaml
