#!/usr/bin/env bash
# What an operator gets, tried in a fresh minimal Debian 12 root (debootstrap --variant=minbase,
# entered with chroot; no container engine or registry needed). CI runs it after the tests.
#
#   deploy/fresh-root-test.sh [image] [deb]      (default: both)
#
# image  The container image's runtime stage: deploy/kubernetes/stage.sh on the build's binaries
#        (the runtime package list from dpkg-shlibdeps), deploy/kubernetes/runtime-stage.sh in the
#        root (only those packages, the uid 10001 user), then the Containerfile's ENTRYPOINT and
#        CMD as uid 10001 (the listen address made an ephemeral loopback port) and transposectl
#        `devices` and `get` from the same root; then again without /sys mounted (the cached
#        answer must still be this device's: the CPU cache sizes come from CPUID then).
# deb    `cpack -G DEB` in the build directory, `apt-get install ./transposed_*.deb` in a second
#        copy of the root (apt resolves the runtime Depends from Debian's mirror), the package's
#        layout checked (binaries in /usr/bin, the unit's ExecStart binary and --config file
#        present, the system user, no -dev package among the Depends), the unit rated by
#        `systemd-analyze security` (at most 4.0), then the unit's ExecStart run as its User=
#        and transposectl `devices` and `tune` against it, and its metrics (on in the package's
#        configuration) scraped; then transposed-dev with cmake, make and g++,
#        and find_package(transposed) in a CMake project (its Depends are enough).
#
# Needs root (re-runs itself with sudo), debootstrap and network access to the Debian mirror
# ($DEBIAN_MIRROR, default http://deb.debian.org/debian). The debootstrapped root is cached as a
# tarball in $TRANSPOSED_CACHE (default ~/.cache/transposed) for 7 days, the downloaded .debs
# beside it; BUILD_DIR (default build) must hold a build of the daemon and the CLI.
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=$PWD
if [ "$(id -u)" -ne 0 ]; then
  exec sudo --preserve-env=BUILD_DIR,TRANSPOSED_CACHE,DEBIAN_MIRROR,HOME bash "$0" "$@"
fi
BUILD_DIR=$(cd "${BUILD_DIR:-build}" && pwd)
CACHE=${TRANSPOSED_CACHE:-${HOME:-/root}/.cache/transposed}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
MODES=("$@")
[ ${#MODES[@]} -gt 0 ] || MODES=(image deb)
for m in "${MODES[@]}"; do
  case "$m" in image | deb) ;; *) echo "fresh-root-test: unknown mode $m (image, deb)" >&2; exit 2 ;; esac
done
for tool in debootstrap chroot dpkg-shlibdeps; do
  command -v "$tool" >/dev/null || { echo "fresh-root-test: $tool is missing (deploy/install-deps.sh --ci)" >&2; exit 1; }
done

WORK=$(mktemp -d /tmp/transposed-fresh-root.XXXXXX)
MOUNTS=()
PIDS=()
cleanup() {
  local rc=$? i
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  for ((i = ${#MOUNTS[@]} - 1; i >= 0; i--)); do umount -l "${MOUNTS[i]}" 2>/dev/null || true; done
  # Never delete through a mount that is still there (a bind mount of the host's files).
  if grep -q " $WORK/" /proc/mounts; then
    echo "fresh-root-test: mounts left under $WORK; not removing it" >&2
  else
    rm -rf "$WORK"
  fi
  exit $rc
}
trap cleanup EXIT
step() { printf '[fresh-root %3ds] %s\n' "$SECONDS" "$*"; }
fail() { echo "fresh-root-test: FAILED: $*" >&2; exit 1; }
# Runs "$@" with its output in a log that is printed only when it fails.
quiet() {
  local log=$WORK/cmd.log
  "$@" > "$log" 2>&1 || { tail -40 "$log" >&2; fail "$*"; }
}

# The base root: debootstrap once, then a tarball reused for 7 days (and for both modes).
arch=$(dpkg --print-architecture)
base=$CACHE/debian12-minbase-$arch.tar
mkdir -p "$CACHE/apt-archives/partial"
if [ -z "$(find "$base" -mtime -7 2>/dev/null)" ]; then
  step "debootstrap --variant=minbase bookworm ($MIRROR) -> $base"
  quiet debootstrap --variant=minbase --cache-dir="$CACHE/apt-archives" bookworm "$WORK/base" "$MIRROR"
  tar -C "$WORK/base" -cf "$base.tmp" . && mv "$base.tmp" "$base"
  rm -rf "$WORK/base"
else
  step "base root from $base"
fi

# A fresh copy of the base root with /proc, /sys and the shared .deb cache mounted.
new_root() {
  local root=$WORK/$1
  mkdir -p "$root"
  tar -C "$root" -xf "$base"
  cp /etc/resolv.conf "$root/etc/resolv.conf"
  mount -t proc proc "$root/proc" && MOUNTS+=("$root/proc")
  mount -t sysfs sysfs "$root/sys" && MOUNTS+=("$root/sys")
  mount --bind "$CACHE/apt-archives" "$root/var/cache/apt/archives" &&
    MOUNTS+=("$root/var/cache/apt/archives")
}

# Starts the daemon in ROOT as USER: "$@" plus an ephemeral loopback port; sets PORT.
start_daemon() {
  local root=$1 user=$2 dir=$3 ids
  shift 3
  ids=$(chroot "$root" getent passwd "$user" | cut -d: -f3,4) || fail "no user $user in $root"
  rm -f "$root/tmp/port"
  chroot --userspec="$ids" "$root" /usr/bin/env -i PATH=/opt/transposed/bin:/usr/bin:/bin \
    HOME="$dir" /bin/sh -c 'cd "$0" && exec "$@"' "$dir" "$@" --listen 127.0.0.1:0 \
    --port-file /tmp/port > "$WORK/daemon-$user.log" 2>&1 &
  PIDS+=($!)
  local pid=$! i
  for i in $(seq 1 300); do
    [ -s "$root/tmp/port" ] && break
    kill -0 "$pid" 2>/dev/null || { cat "$WORK/daemon-$user.log" >&2; fail "the daemon exited"; }
    sleep 0.1
  done
  [ -s "$root/tmp/port" ] || { cat "$WORK/daemon-$user.log" >&2; fail "the daemon did not start"; }
  PORT=$(cat "$root/tmp/port")
}

# Runs transposectl (at CTL in ROOT) against the daemon; its output is shown and must match WANT.
ctl() {
  local root=$1 bin=$2 want=$3 out
  shift 3
  out=$(chroot "$root" "$bin" --server "127.0.0.1:$PORT" "$@" 2>&1) ||
    { echo "$out" >&2; fail "transposectl $*"; }
  echo "$out" | sed 's/^/    /'
  grep -Eq "$want" <<< "$out" || fail "transposectl $*: no '$want' in its output"
}

test_image() {
  step "image: stage the build (deploy/kubernetes/stage.sh)"
  new_root image
  local root=$WORK/image
  bash deploy/kubernetes/stage.sh "$BUILD_DIR" "$root/opt/transposed"
  step "image: runtime stage (deploy/kubernetes/runtime-stage.sh) in a fresh root"
  cp deploy/kubernetes/runtime-stage.sh "$root/tmp/runtime-stage.sh"
  quiet chroot "$root" sh /tmp/runtime-stage.sh /opt/transposed
  # The Containerfile's ENTRYPOINT and CMD (exec form), without its --listen.
  mapfile -t cmd < <(python3 - deploy/kubernetes/Containerfile <<'EOF'
import json, sys
ep = cmd = None
for line in open(sys.argv[1]):
    if line.startswith("ENTRYPOINT "): ep = json.loads(line[len("ENTRYPOINT "):])
    if line.startswith("CMD "): cmd = json.loads(line[len("CMD "):])
args = ep + cmd
i = args.index("--listen")
del args[i:i + 2]
print("\n".join(args))
EOF
)
  step "image: ${cmd[*]} (uid 10001)"
  start_daemon "$root" 10001 /var/lib/transposed "${cmd[@]}"
  ctl "$root" /opt/transposed/bin/transposectl "cpu" devices
  ctl "$root" /opt/transposed/bin/transposectl "source: +tuned" get --rows 256 --cols 384 --dtype f32
  ctl "$root" /opt/transposed/bin/transposectl "source: +cache" get --rows 256 --cols 384 --dtype f32
  kill -TERM "${PIDS[-1]}" && wait "${PIDS[-1]}" || fail "the daemon did not stop cleanly on SIGTERM"
  # Without /sys (some container runtimes): the CPU's cache sizes come from CPUID, the device
  # stays the same, so the cached answer is still this device's.
  umount "$root/sys"
  step "image: again without /sys"
  start_daemon "$root" 10001 /var/lib/transposed "${cmd[@]}"
  ctl "$root" /opt/transposed/bin/transposectl "source: +cache" get --rows 256 --cols 384 --dtype f32
  kill -TERM "${PIDS[-1]}" && wait "${PIDS[-1]}" || fail "the daemon did not stop cleanly on SIGTERM"
  step "image: ok ($(du -sxh --exclude=./var/cache/apt "$root" | cut -f1) root, packages: $(tr '\n' ' ' < "$root/opt/transposed/runtime-packages.txt"))"
}

test_deb() {
  step "deb: cpack -G DEB in $BUILD_DIR"
  rm -f "$BUILD_DIR"/transposed*.deb
  (cd "$BUILD_DIR" && quiet cpack -G DEB)
  local deb
  deb=$(ls "$BUILD_DIR"/transposed_*.deb)
  step "deb: $(basename "$deb") ($(du -h "$deb" | cut -f1)); Depends: $(dpkg-deb -f "$deb" Depends)"
  dpkg-deb -f "$deb" Depends | grep -q -- '-dev' && fail "the package Depends on -dev packages"
  new_root deb
  local root=$WORK/deb
  cp "$deb" "$root/tmp/"
  step "deb: apt-get install ./$(basename "$deb") in a fresh root"
  quiet chroot "$root" apt-get update -qq
  quiet chroot "$root" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
    --no-install-recommends "/tmp/$(basename "$deb")"
  local unit=$root/lib/systemd/system/transposed.service
  [ -f "$unit" ] || unit=$root/usr/lib/systemd/system/transposed.service
  [ -f "$unit" ] || fail "no transposed.service installed"
  for f in /usr/bin/transposed /usr/bin/transposectl /etc/transposed/transposed.toml; do
    [ -e "$root$f" ] || fail "$f is not installed"
  done
  grep -qx /etc/transposed/transposed.toml "$root/var/lib/dpkg/info/transposed.conffiles" ||
    fail "/etc/transposed/transposed.toml is not a conffile"
  chroot "$root" getent passwd transposed > /dev/null || fail "no system user transposed"
  local user exec_start
  user=$(sed -n 's/^User=//p' "$unit")
  [ "$user" = transposed ] || fail "the unit runs as '$user', not the package's user transposed"
  exec_start=$(sed -n 's/^ExecStart=//p' "$unit")
  read -r -a cmd <<< "$exec_start"
  [ -x "$root${cmd[0]}" ] || fail "the unit's ExecStart ${cmd[0]} is not an installed executable"
  local i
  for ((i = 1; i < ${#cmd[@]}; i++)); do
    if [ "${cmd[i]}" = --config ]; then
      [ -f "$root${cmd[i + 1]}" ] || fail "the unit's --config ${cmd[i + 1]} is not installed"
    fi
  done
  if command -v systemd-analyze >/dev/null; then
    local sec
    sec=$(cd "$root" && systemd-analyze security --offline=true --root="$root" \
      "${unit#"$root"}" 2>&1 | grep 'Overall exposure') || true
    step "deb: systemd-analyze security: ${sec:-(no rating)}"
    awk '{for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+\.[0-9]+$/) { exit !($i <= 4.0) }; exit 1}' \
      <<< "$sec" || fail "the unit's exposure is above 4.0"
  fi
  step "deb: ExecStart as $user: ${cmd[*]}"
  # What StateDirectory=transposed gives the service under systemd.
  [ -d "$root/var/lib/transposed" ] || fail "/var/lib/transposed was not created"
  start_daemon "$root" "$user" /var/lib/transposed "${cmd[@]}"
  ctl "$root" /usr/bin/transposectl "cpu" devices
  ctl "$root" /usr/bin/transposectl "source: +tuned" tune --rows 320 --cols 200 --dtype f16
  ctl "$root" /usr/bin/transposectl "source: +cache" get --rows 320 --cols 200 --dtype f16
  # Metrics are on in the package's configuration (metrics-listen), with dcgm-exporter's labels.
  local metrics_port
  metrics_port=$(sed -n 's/^metrics-listen *= *"[^"]*:\([0-9]*\)".*/\1/p' "$root/etc/transposed/transposed.toml")
  [ -n "$metrics_port" ] || fail "the package's configuration serves no metrics (metrics-listen)"
  python3 - "$metrics_port" <<'EOF2' || fail "no dcgm-labelled series at :$metrics_port/metrics"
import sys, urllib.request
text = urllib.request.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[1], timeout=10).read().decode()
hits = [l for l in text.splitlines() if l.startswith("transposed_cache_hits_total{")]
ok = hits and all('gpu="0"' in l and "UUID=" in l and "Hostname=" in l and "device=" not in l
                  for l in hits[:1])
print("    " + (hits[0] if hits else "(no transposed_cache_hits_total)"))
sys.exit(0 if ok else 1)
EOF2
  kill -TERM "${PIDS[-1]}" && wait "${PIDS[-1]}" || fail "the daemon did not stop cleanly on SIGTERM"
  # transposed-dev: its Depends are enough for find_package(transposed) (issue 37: Debian's gRPC
  # CMake package needs grpc_cpp_plugin, from protobuf-compiler-grpc). A package built with CUDA
  # also needs a CUDA toolkit, which this root has not: then the search must get as far as it.
  local dev
  dev=$(ls "$BUILD_DIR"/transposed-dev_*.deb)
  cp "$dev" "$root/tmp/"
  step "deb: apt-get install ./$(basename "$dev") cmake make g++; find_package(transposed)"
  quiet chroot "$root" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
    --no-install-recommends "/tmp/$(basename "$dev")" cmake make g++
  mkdir -p "$root/tmp/consumer"
  printf '%s\n' 'cmake_minimum_required(VERSION 3.25)' 'project(consumer CXX)' \
    'find_package(transposed CONFIG REQUIRED)' > "$root/tmp/consumer/CMakeLists.txt"
  if ! chroot "$root" cmake -S /tmp/consumer -B /tmp/consumer/build > "$WORK/consumer.log" 2>&1; then
    if grep -q 'set(transposed_HAVE_CUDA ON)' "$root"/usr/lib/*/cmake/transposed/transposedConfig.cmake \
        "$root"/usr/lib/cmake/transposed/transposedConfig.cmake 2>/dev/null &&
        grep -q CUDAToolkit "$WORK/consumer.log" && ! grep -qi 'grpc' "$WORK/consumer.log"; then
      step "deb: find_package(transposed) got to CUDAToolkit (a CUDA build; no toolkit in this root)"
    else
      tail -30 "$WORK/consumer.log" >&2
      fail "find_package(transposed) failed with only transposed-dev's Depends"
    fi
  else
    step "deb: find_package(transposed) found with transposed-dev's Depends"
  fi
  step "deb: ok"
}

for m in "${MODES[@]}"; do "test_$m"; done
step "passed: ${MODES[*]}"
