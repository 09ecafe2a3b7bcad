#!/usr/bin/env bash
# Installs the Debian 12 packages transposed builds and runs with. Idempotent; uses sudo when not
# root. CUDA is optional: if nvcc is installed (/usr/local/cuda or on PATH) the GPU code is built
# too; without it the daemon runs with its CPU backend.
#
#   deploy/install-deps.sh               build, run and test (CI): also node + npm and the pinned
#                                        npm packages of the Kubernetes manifest validator
#   deploy/install-deps.sh --build-only  only what building and running needs (the container image)
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_ONLY=0
for arg in "$@"; do
  case "$arg" in
    --build-only) BUILD_ONLY=1 ;;
    *) echo "install-deps: unknown argument $arg (known: --build-only)" >&2; exit 2 ;;
  esac
done

PKGS=(
  build-essential cmake ninja-build pkg-config git
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libsqlite3-dev sqlite3 libspdlog-dev libcli11-dev nlohmann-json3-dev prometheus-cpp-dev
  libgtest-dev libgmock-dev
  python3 python3-grpcio python3-protobuf python3-pip python3-setuptools
)
# Tests only: clang checks the thread-safety annotations (deploy/thread-safety.sh); openssl makes
# the TLS/mTLS certificates of the security tests (server/security_e2e_test.cc).
if [ "$BUILD_ONLY" -eq 0 ]; then
  PKGS+=(clang openssl)
  # The README's `pip install ./python` into a virtual environment (Debian's python3 is
  # externally managed, PEP 668).
  PKGS+=(python3-venv)
fi
# Tests only: node and npm run the Kubernetes manifest validator (deploy/kubernetes/validate/).
# A node that is already installed (from any source) is used as it is.
if [ "$BUILD_ONLY" -eq 0 ] && ! { command -v node >/dev/null && command -v npm >/dev/null; }; then
  PKGS+=(nodejs npm)
fi

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PKGS[@]} packages present"
else
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
    SUDO="sudo"
  fi
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The manifest validator's npm packages, exactly as pinned by its package-lock.json (npm ci).
if [ "$BUILD_ONLY" -eq 0 ]; then
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
