#!/usr/bin/env bash
# CTest packaging_test: what the Debian packages and the image carry besides the programs (issue
# 37). `cpack -G DEB` of the build into a scratch directory, then:
#   - both packages: /usr/share/doc/<package>/copyright (Apache-2.0, as the repository's LICENSE)
#     and changelog.gz (its version the package's), a Maintainer with an address;
#   - transposed: man pages of transposed and transposectl (rendered by man without warnings
#     where man is installed), the bash, zsh and fish completion files;
#   - transposed-dev: Depends on protobuf-compiler-grpc (Debian's gRPC CMake package needs
#     grpc_cpp_plugin, so find_package(transposed) fails without it);
#   - lintian (Debian 12's) reports no error on either package;
#   - the Containerfile's OCI labels (title, version, revision, licenses = Apache-2.0).
# Without lintian it reports itself skipped (exit 77) unless $CI is set, where it fails
# (deploy/install-deps.sh --ci installs it).
#
#   deploy/packaging_test.sh BUILD_DIR
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "$1" && pwd)
fail() { echo "packaging_test: FAILED: $*" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

grep -q "Apache License" "$src/LICENSE" && grep -q "Version 2.0, January 2004" "$src/LICENSE" ||
  fail "LICENSE is not the Apache License 2.0"
grep -q '^License: Apache-2.0$' "$src/deploy/debian/copyright" ||
  fail "deploy/debian/copyright does not say Apache-2.0"
for label in title description version revision licenses; do
  grep -q "org.opencontainers.image.$label=" "$src/deploy/kubernetes/Containerfile" ||
    fail "the Containerfile has no org.opencontainers.image.$label label"
done
grep -q 'org.opencontainers.image.licenses="Apache-2.0"' "$src/deploy/kubernetes/Containerfile" ||
  fail "the image's license label is not Apache-2.0"

(cd "$build" && cpack -G DEB -B "$work/out" > "$work/cpack.log" 2>&1) ||
  { tail -20 "$work/cpack.log"; fail "cpack -G DEB"; }
deb=$(ls "$work"/out/transposed_*.deb)
dev=$(ls "$work"/out/transposed-dev_*.deb)
version=$(dpkg-deb -f "$deb" Version)
changelog_version=$(sed -n '1s/^transposed (\([^)]*\)).*/\1/p' "$src/deploy/debian/changelog")
[ "$version" = "$changelog_version" ] ||
  fail "deploy/debian/changelog's version $changelog_version is not the package's $version"
for pkg in "$deb" "$dev"; do
  name=$(dpkg-deb -f "$pkg" Package)
  dpkg-deb -f "$pkg" Maintainer | grep -Eq '^[^<>]+ <[^<>@ ]+@[^<>@ ]+\.[^<>@ ]+>$' ||
    fail "$name: Maintainer '$(dpkg-deb -f "$pkg" Maintainer)' has no address"
  dpkg-deb -c "$pkg" | awk '{print $6}' > "$work/$name.files"
  for f in copyright changelog.gz; do
    grep -qx "./usr/share/doc/$name/$f" "$work/$name.files" || fail "$name: no /usr/share/doc/$name/$f"
  done
done
for f in ./usr/share/man/man1/transposed.1.gz ./usr/share/man/man1/transposectl.1.gz \
         ./usr/share/bash-completion/completions/transposectl \
         ./usr/share/zsh/vendor-completions/_transposectl \
         ./usr/share/fish/vendor_completions.d/transposectl.fish; do
  grep -qx "$f" "$work/transposed.files" || fail "transposed: $f is not installed"
done
dpkg-deb -f "$dev" Depends | tr ',' '\n' | grep -q '^ *protobuf-compiler-grpc' ||
  fail "transposed-dev does not depend on protobuf-compiler-grpc: $(dpkg-deb -f "$dev" Depends)"

# The man pages: the programs' --help, rendered without warnings.
dpkg-deb -x "$deb" "$work/root"
for page in transposed transposectl; do
  zcat "$work/root/usr/share/man/man1/$page.1.gz" | grep -q -- '--help' ||
    zcat "$work/root/usr/share/man/man1/$page.1.gz" | grep -q -- '--server\|--listen' ||
    fail "$page.1 does not hold the program's flags"
  if command -v man > /dev/null; then
    warnings=$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -l "$work/root/usr/share/man/man1/$page.1.gz" 2>&1 >/dev/null || true)
    [ -z "$warnings" ] || fail "$page.1: $warnings"
  fi
done

if ! command -v lintian > /dev/null; then
  [ -z "${CI:-}" ] || fail "lintian is not installed (deploy/install-deps.sh --ci)"
  echo "packaging_test: SKIPPED: lintian is not installed (deploy/install-deps.sh --ci); everything else passed"
  exit 77
fi
for pkg in "$deb" "$dev"; do
  lintian --fail-on error --tag-display-limit 0 "$pkg" > "$work/lintian.log" 2>&1 ||
    { cat "$work/lintian.log"; fail "lintian: errors in $(basename "$pkg")"; }
  echo "packaging_test: lintian $(basename "$pkg"): $(grep -c '^E:' "$work/lintian.log") errors, $(grep -c '^W:' "$work/lintian.log") warnings"
done
echo "packaging_test: passed"
