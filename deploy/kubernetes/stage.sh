#!/usr/bin/env bash
# The container image's build stage, after the build: copies the daemon, the CLI and (when it was
# built) the CUDA worker from BUILD_DIR/bin into DEST/bin, strips them, and writes the runtime
# stage's package list, DEST/runtime-packages.txt (deploy/runtime-packages.sh: dpkg-shlibdeps).
# Used by deploy/kubernetes/Containerfile and by deploy/fresh-root-test.sh, which assembles the
# runtime stage in a fresh Debian 12 root.
#
#   deploy/kubernetes/stage.sh BUILD_DIR DEST
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 BUILD_DIR DEST" >&2; exit 2; }
build=$1
dest=$2
here=$(cd "$(dirname "$0")/.." && pwd)

mkdir -p "$dest/bin"
for b in transposed transposectl transposed-worker; do
  if [ -x "$build/bin/$b" ]; then
    install -m755 "$build/bin/$b" "$dest/bin/$b"
  elif [ "$b" != transposed-worker ]; then
    echo "stage: $build/bin/$b was not built" >&2
    exit 1
  fi
done
strip "$dest"/bin/*
bash "$here/runtime-packages.sh" "$dest"/bin/* > "$dest/runtime-packages.txt"
echo "stage: $(ls "$dest/bin" | tr '\n' ' ')-> $dest; runtime packages:" $(cat "$dest/runtime-packages.txt")
