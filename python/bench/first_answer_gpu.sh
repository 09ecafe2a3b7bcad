#!/usr/bin/env bash
# On a GPU machine: the first answer through a real daemon (python/bench/first_answer_gpu.py): a
# fresh daemon with the CUDA backend answers a seeded random set of new problems under
# ANSWER_NOW, then tunes each exhaustively; the answered configuration against the winner, both
# measured side by side in that tune.
#   python/bench/first_answer_gpu.sh BUNDLE OUTDIR
# OUTDIR receives first_answer.json, daemon.log and run.log. The set: FIRST_ANSWER_N (24)
# problems from a fresh seed, printed, unless FIRST_ANSWER_SEED or SEED is set (SEED=<printed>
# reproduces a run's set); FIRST_ANSWER_TIMEOUT_S (300) bounds the stage (24 problems: about
# 25 s on an H100 or H200). The daemon may queue 64 tunes (the ANSWER_NOW misses' background
# tunes must leave room for the Tunes). Exit status non-zero when a call failed or an answer was
# not measured (the quality itself is reported, not judged: issue 26 asks for a median >= 0.9).
set -uo pipefail
bundle=$(cd "${1:?usage: first_answer_gpu.sh BUNDLE OUTDIR}" && pwd)
out=${2:?usage: first_answer_gpu.sh BUNDLE OUTDIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
exec > >(tee "$out/run.log") 2>&1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null || true
"$bundle/run" with_daemon --copy-log "$out/daemon.log" --daemon "$bundle/bin/transposed" \
  --backend "${FIRST_ANSWER_BACKEND:-cuda}" --tune-budget 10 \
  --daemon-arg --max-queued-tunes --daemon-arg 64 -- \
  timeout "${FIRST_ANSWER_TIMEOUT_S:-300}" env -u LD_LIBRARY_PATH PYTHONPATH="$bundle/python" PYTHONUNBUFFERED=1 \
  FIRST_ANSWER_OUT="$out/first_answer.json" python3 "$here/first_answer_gpu.py"
status=$?
echo "python/bench/first_answer_gpu.sh: status $status"
exit $status
