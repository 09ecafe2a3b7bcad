#!/bin/bash
# Slurm prolog: pre-tunes the problems a user's jobs asked for last time on this node's daemon,
# before the job starts (docs/user/polite.md).
#
# Install on every GPU node and name it in slurm.conf:
#   Prolog=/etc/slurm/prolog.d/transposed-prolog.sh
# (or run it from the job script itself, before `srun`, with TRANSPOSED_SHAPES set).
#
# The shapes file: $TRANSPOSED_SHAPES if set, else $TRANSPOSED_SHAPES_DIR/$SLURM_JOB_USER.txt
# (default directory /var/lib/transposed/shapes), one problem a line: `ROWS COLS DTYPE [BATCH]`
# or a JSON Problem, as a job writes it with transposed.write_recorded_problems(path) (Python)
# at its end. The tunes are polite (`--background`): on a GPU another job still uses, they yield
# to it, and are abandoned after the daemon's --background-max-wait instead of slowing it. The
# prolog waits at most $TRANSPOSED_PROLOG_TIMEOUT seconds (300) and never fails the job: Slurm
# drains a node whose prolog fails, and a job without pre-tuning only tunes on its first asks.
set -u
server=${TRANSPOSED_SERVER:-127.0.0.1:50051}
user=${SLURM_JOB_USER:-${USER:-}}
shapes=${TRANSPOSED_SHAPES:-${TRANSPOSED_SHAPES_DIR:-/var/lib/transposed/shapes}/${user}.txt}
transposectl=${TRANSPOSECTL:-transposectl}
limit=${TRANSPOSED_PROLOG_TIMEOUT:-300}
log() { logger -t transposed-prolog "job ${SLURM_JOB_ID:-?}: $*" 2>/dev/null || echo "transposed-prolog: $*" >&2; }

if [ ! -r "$shapes" ]; then
  exit 0  # nothing recorded for this user yet
fi
if timeout "$limit" "$transposectl" --server "$server" --timeout "$limit" \
     tune --from "$shapes" --background > /dev/null 2> "${TMPDIR:-/tmp}/transposed-prolog.$$"; then
  log "pre-tuned $(tail -n 1 "${TMPDIR:-/tmp}/transposed-prolog.$$")"
else
  log "pre-tuning $shapes did not complete (the job goes on): $(tail -n 3 "${TMPDIR:-/tmp}/transposed-prolog.$$" | tr '\n' ' ')"
fi
rm -f "${TMPDIR:-/tmp}/transposed-prolog.$$"
exit 0
