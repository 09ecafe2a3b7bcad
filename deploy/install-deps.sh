#!/usr/bin/env bash
# Installs the Debian 12 packages transposed builds and runs with. Idempotent; uses sudo when not
# root. CUDA is optional: if nvcc is installed (/usr/local/cuda or on PATH) the GPU code is built
# too; without it the daemon runs with its CPU backend.
#
#   deploy/install-deps.sh --build-only  what building and running needs (the quick start, the
#                                        container image's build stage)
#   deploy/install-deps.sh --tests       and what deploy/test.sh's tests need (openssl for the TLS
#                                        certificates, python3-venv for `pip install ./python`)
#   deploy/install-deps.sh [--ci]        everything CI (.ci/run) runs: also clang (the thread-
#                                        safety build), node + npm and the pinned npm packages of
#                                        the Kubernetes manifest validator, debootstrap and
#                                        systemd (deploy/fresh-root-test.sh, systemd-analyze),
#                                        zsh and fish (the completion scripts' test), lintian
#                                        (the packages' test)
#   ... --list                           print the mode's Debian packages, install nothing
# Package progress goes to a log file ($TMPDIR/transposed-install-deps.log), printed on failure.
set -euo pipefail
cd "$(dirname "$0")/.."

MODE=ci
LIST=0
for arg in "$@"; do
  case "$arg" in
    --build-only) MODE=build ;;
    --tests) MODE=tests ;;
    --ci) MODE=ci ;;
    --list) LIST=1 ;;
    *) echo "install-deps: unknown argument $arg (known: --build-only, --tests, --ci, --list)" >&2; exit 2 ;;
  esac
done

# `file`: CPack's DEB generator (`cpack -G DEB`) needs it; dpkg-dev (build-essential) brings
# dpkg-shlibdeps, which derives the package's and the container image's runtime packages.
PKGS=(
  build-essential cmake ninja-build pkg-config git file
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libsqlite3-dev sqlite3 libspdlog-dev libcli11-dev nlohmann-json3-dev prometheus-cpp-dev
  libhiredis-dev
  libgtest-dev libgmock-dev
  python3 python3-grpcio python3-protobuf python3-pip python3-setuptools
)
if [ "$MODE" != build ]; then
  # openssl makes the TLS/mTLS certificates of the security tests (server/e2e/security_e2e_test.cc);
  # python3-venv: docs/user/python.md's `pip install ./python` into a virtual environment (Debian's
  # python3 is externally managed, PEP 668); redis-server: the shared store's tests
  # (server/fleet/fleet_flight_test.cc, server/e2e/fleet_herd_test.cc) start a real one on loopback (the
  # daemon itself needs only libhiredis, for --shared-store).
  PKGS+=(openssl python3-venv redis-server)
fi
if [ "$MODE" = ci ]; then
  # clang checks the thread-safety annotations (deploy/thread-safety.sh); debootstrap and systemd
  # (systemd-analyze) for deploy/fresh-root-test.sh and the unit's exposure check.
  PKGS+=(clang debootstrap systemd)
  # clang-format (git-clang-format): deploy/format-check.sh, the changed C++ lines' format.
  PKGS+=(clang-format)
  # lintian checks the Debian packages (deploy/packaging_test.sh, CTest packaging_test).
  PKGS+=(lintian)
  # zsh and fish: client/completion_test.sh runs transposectl's completion scripts in them.
  PKGS+=(zsh fish)
  # node and npm run the Kubernetes manifest validator (deploy/kubernetes/validate/). A node that
  # is already installed (from any source) is used as it is.
  if ! { command -v node >/dev/null && command -v npm >/dev/null; }; then
    PKGS+=(nodejs npm)
  fi
fi

if [ "$LIST" -eq 1 ]; then
  printf '%s\n' "${PKGS[@]}"
  exit 0
fi
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps ($MODE): all ${#PKGS[@]} packages present"
else
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
    SUDO="sudo"
  fi
  log=${TMPDIR:-/tmp}/transposed-install-deps.log
  echo "install-deps ($MODE): installing ${#missing[@]} packages: ${missing[*]} (log: $log)"
  export DEBIAN_FRONTEND=noninteractive
  start=$SECONDS
  if ! { $SUDO apt-get update -qq && \
         $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"; } > "$log" 2>&1; then
    tail -30 "$log" >&2
    echo "install-deps: apt-get failed (log: $log)" >&2
    exit 1
  fi
  echo "install-deps: done in $((SECONDS - start)) s"
fi

# The manifest validator's npm packages, exactly as pinned by its package-lock.json (npm ci).
if [ "$MODE" = ci ]; then
  validator=deploy/kubernetes/validate
  stamp=$validator/node_modules/.installed-from-lock
  if [ -f "$stamp" ] && cmp -s "$validator/package-lock.json" "$stamp"; then
    echo "install-deps: manifest validator packages present"
  else
    echo "install-deps: npm ci in $validator"
    (cd "$validator" && npm ci --no-audit --no-fund --loglevel=error)
    cp "$validator/package-lock.json" "$stamp"
  fi
fi
