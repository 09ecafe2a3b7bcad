#!/usr/bin/env bash
# Prints the Debian packages that the shared libraries of the given ELF binaries come from, one
# name per line, as dpkg-shlibdeps computes them from the packages' shlibs/symbols files (the same
# tool CPack's DEB generator uses for the .deb's Depends). The container image's runtime stage
# installs exactly this list (deploy/kubernetes/Containerfile); deploy/fresh-root-test.sh checks
# that a minimal Debian 12 root with only these packages runs the daemon.
#
#   deploy/runtime-packages.sh BINARY...            names only (for apt-get install)
#   deploy/runtime-packages.sh --depends BINARY...  the versioned Depends line
#
# Fails (non-zero, with dpkg-shlibdeps' message) when a needed library belongs to no installed
# package, instead of printing a short list: `ldd | dpkg -S` on merged-/usr Debian finds only the
# few libraries ldd happens to print under /usr.
set -euo pipefail

depends=0
if [ "${1:-}" = "--depends" ]; then
  depends=1
  shift
fi
[ $# -gt 0 ] || { echo "usage: $0 [--depends] BINARY..." >&2; exit 2; }
command -v dpkg-shlibdeps >/dev/null || { echo "$0: dpkg-shlibdeps not found (apt-get install dpkg-dev)" >&2; exit 1; }

args=()
for b in "$@"; do
  [ -f "$b" ] || { echo "$0: $b: no such file" >&2; exit 1; }
  args+=("-e$(readlink -f "$b")")
done

# dpkg-shlibdeps wants a source package layout (debian/control); an empty one is enough.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/debian"
: > "$work/debian/control"
if ! (cd "$work" && dpkg-shlibdeps -O "${args[@]}") > "$work/out" 2> "$work/err"; then
  cat "$work/err" >&2
  exit 1
fi
# Only the warning about analysing binaries outside a package build directory is expected.
grep -v "binaries to analyze should already be installed" "$work/err" >&2 || true

line=$(sed -n 's/^shlibs:Depends=//p' "$work/out")
[ -n "$line" ] || { echo "$0: dpkg-shlibdeps printed no Depends for $*" >&2; exit 1; }
if [ "$depends" -eq 1 ]; then
  echo "$line"
else
  # "libfoo1 (>= 1.2), liba | libb" -> libfoo1, liba (the first of alternatives).
  tr ',' '\n' <<< "$line" | sed 's/|.*//; s/(.*)//; s/[[:space:]]//g' | grep -v '^$' | sort -u
fi
