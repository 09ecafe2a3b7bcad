#!/usr/bin/env bash
# The files the packages install beside the programs, made from the built programs themselves so
# that they never drift from them (cmake/transposed_install.cmake runs it at build time):
#   OUT/man/transposed.1.gz, OUT/man/transposectl.1.gz   man pages from --help (each transposectl
#                                                        command's --help too), gzip -9n
#   OUT/completions/{transposectl,_transposectl,transposectl.fish}
#                                                        `transposectl completion bash|zsh|fish`
#   OUT/doc/changelog.gz                                 deploy/debian/changelog, gzip -9n
#
#   deploy/debian/share.sh TRANSPOSED TRANSPOSECTL OUT
set -euo pipefail
daemon=$1 ctl=$2 out=$3
src=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out/man" "$out/completions" "$out/doc"

# Help text as roff: a no-fill block, backslashes and leading dots/quotes escaped.
roff() { sed -e 's/\\/\\e/g' -e 's/^\([.'"'"']\)/\\\&\1/'; }
# man NAME SUMMARY HELP_CMD... : the page on stdout (sections from the help; no date, reproducible).
page() {
  local name=$1 summary=$2 version
  shift 2
  version=$("$@" --version | head -1 | awk '{print $2}')
  printf '.TH %s 1 "" "%s %s" "User Commands"\n' "${name^^}" "$name" "$version"
  printf '.SH NAME\n%s \\- %s\n' "$name" "$summary"
  printf '.SH DESCRIPTION\n.nf\n'
  "$@" --help | roff
  printf '.fi\n'
}

{
  page transposed "auto-tuning gRPC daemon for GPU matrix transposition" "$daemon"
  printf '.SH FILES\n.TP\n/etc/transposed/transposed.toml\nThe configuration of transposed.service (keys: the long flags).\n'
  printf '.SH SEE ALSO\n.BR transposectl (1),\n.BR systemctl (1)\n'
} | gzip -9n > "$out/man/transposed.1.gz"

{
  page transposectl "command-line client of the transposed daemon" "$ctl"
  printf '.SH COMMANDS\n'
  for cmd in get tune devices list delete export import completion; do
    printf '.SS %s\n.nf\n' "$cmd"
    "$ctl" "$cmd" --help | roff
    printf '.fi\n'
  done
  printf '.SH ENVIRONMENT\n.TP\nTRANSPOSED_SERVER\nThe daemon address when --server is not given.\n'
  printf '.TP\nTRANSPOSED_TOKEN_FILE\nThe admin token file when --token-file is not given.\n'
  printf '.SH SEE ALSO\n.BR transposed (1)\n'
} | gzip -9n > "$out/man/transposectl.1.gz"

"$ctl" completion bash > "$out/completions/transposectl"
"$ctl" completion zsh > "$out/completions/_transposectl"
"$ctl" completion fish > "$out/completions/transposectl.fish"
gzip -9n < "$src/changelog" > "$out/doc/changelog.gz"
