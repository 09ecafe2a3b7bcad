#!/bin/sh
# The container image's runtime stage, run as root inside the runtime root (debian:12-slim, or the
# minimal Debian 12 root of deploy/fresh-root-test.sh): installs the packages listed in
# PREFIX/runtime-packages.txt (written by deploy/kubernetes/stage.sh) and nothing else, and
# creates the unprivileged user the daemon runs as (uid 10001, home /var/lib/transposed).
#
#   runtime-stage.sh PREFIX        (the Containerfile: /opt/transposed)
set -eu
prefix=${1:?usage: runtime-stage.sh PREFIX}
[ -s "$prefix/runtime-packages.txt" ] || { echo "runtime-stage: $prefix/runtime-packages.txt is empty" >&2; exit 1; }
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
xargs -a "$prefix/runtime-packages.txt" apt-get install -y -qq --no-install-recommends >/dev/null
rm -rf /var/lib/apt/lists/*
getent passwd 10001 >/dev/null ||
  useradd --system --uid 10001 --user-group --home-dir /var/lib/transposed --create-home \
    --shell /usr/sbin/nologin transposed
