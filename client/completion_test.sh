#!/usr/bin/env bash
# CTest completion_test: the completion scripts of transposectl (client/completion.h) do what they
# promise, in the shells themselves: bash always; zsh and fish where installed (CI installs both:
# deploy/install-deps.sh --ci; with $CI set a missing one fails; without, the test reports itself
# skipped (exit 77, CTest's SKIP_RETURN_CODE) rather than passed, and deploy/test.sh lists it).
#   client/completion_test.sh PATH/TO/transposectl
set -euo pipefail
ctl=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "completion_test: FAILED: $*" >&2; exit 1; }
touch "$work/problems.txt" "$work/token"

# bash: commands, a command's flags, --dtype values, file names for file options and import.
"$ctl" completion bash > "$work/c.bash"
bash_complete() {  # words... -> the candidates for the last word
  bash -c 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _transposectl;
           printf "%s\n" "${COMPREPLY[@]}"' _ "$work/c.bash" "$@"
}
# grep -x > /dev/null, never grep -q, after a pipe: -q exits at the first match, and the writer,
# still printing, then dies of SIGPIPE, which pipefail reports as a failure (1 run in 40 under load).
[ "$(bash_complete transposectl ge)" = get ] || fail "bash: commands"
bash_complete transposectl get --cache | grep -x -- --cache-only > /dev/null || fail "bash: get's flags"
[ "$(bash_complete transposectl get --dtype f3)" = f32 ] || fail "bash: --dtype values"
[ "$(bash_complete transposectl tune --from "$work/prob")" = "$work/problems.txt" ] ||
  fail "bash: --from file names"
[ "$(bash_complete transposectl --token-file "$work/tok")" = "$work/token" ] ||
  fail "bash: --token-file file names"
bash_complete transposectl import "$work/pro" | grep -x "$work/problems.txt" > /dev/null || fail "bash: import's file"
[ -z "$(bash_complete transposectl get --rows 1)" ] || fail "bash: a number's value got candidates"
bash_complete transposectl completion "" | grep -x fish > /dev/null || fail "bash: completion's shells"

missing=()
have() {
  command -v "$1" > /dev/null && return 0
  [ -z "${CI:-}" ] || fail "$1 is not installed (deploy/install-deps.sh --ci)"
  missing+=("$1")
  return 1
}
if have zsh; then
  "$ctl" completion zsh > "$work/_transposectl"
  zsh -n "$work/_transposectl" || fail "zsh: syntax"
  # Loaded by compinit from $fpath (the documented install), and sourced.
  out=$(zsh -f -c 'fpath=("$1" $fpath); autoload -U compinit && compinit -u -d "$1/.zcompdump";
                   print -r -- ${_comps[transposectl]}' _ "$work")
  [ "$out" = _transposectl ] || fail "zsh: compinit did not register _transposectl ($out)"
  grep -q "dtype:(f16 bf16 f32" "$work/_transposectl" || fail "zsh: --dtype values"
  grep -q -- "--token-file\[.*\]:file:_files" "$work/_transposectl" || fail "zsh: file options"
fi
if have fish; then
  "$ctl" completion fish > "$work/c.fish"
  fish -n "$work/c.fish" || fail "fish: syntax"
  fish_complete() { fish -c "source '$work/c.fish'; complete -C '$1'" | cut -f1; }
  fish_complete "transposectl " | grep -x tune > /dev/null || fail "fish: commands"
  fish_complete "transposectl get --dtype " | grep -x bf16 > /dev/null || fail "fish: --dtype values"
  fish_complete "transposectl tune --from $work/prob" | grep -x "$work/problems.txt" > /dev/null ||
    fail "fish: --from file names"
  fish_complete "transposectl import $work/pro" | grep -x "$work/problems.txt" > /dev/null ||
    fail "fish: import's file"
fi
"$ctl" completion powershell > /dev/null 2>&1 && fail "an unknown shell was accepted"
if [ ${#missing[@]} -gt 0 ]; then
  echo "completion_test: SKIPPED: ${missing[*]} not installed, its script not checked (deploy/install-deps.sh --ci)"
  exit 77
fi
echo "completion_test: passed"
