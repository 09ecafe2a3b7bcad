#!/usr/bin/env bash
# On a GPU machine: issue 26's measurement (python/bench/polite_gpu.py): a torch job streaming
# memory while the daemon gets new problems under ANSWER_NOW, once per politeness mode:
#   python/bench/polite_gpu.sh BUNDLE OUTDIR
# "duty": the default (a background tune takes at most 5% of a busy GPU's time); "wait":
# --background-duty-cycle 0 (it waits for an idle window). OUTDIR receives <mode>.json,
# <mode>.daemon.log and run.log. Exit status non-zero when a mode lost 5% or more of the job's
# bandwidth or did not tune every problem once the job went idle.
set -uo pipefail
bundle=$(cd "${1:?usage: polite_gpu.sh BUNDLE OUTDIR}" && pwd)
out=${2:?usage: polite_gpu.sh BUNDLE OUTDIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
exec > >(tee "$out/run.log") 2>&1
nvidia-smi --query-gpu=name,uuid,driver_version,memory.total --format=csv
status=0
for mode in duty wait; do
  flags=()
  [ "$mode" = wait ] && flags=(--daemon-arg --background-duty-cycle --daemon-arg 0)
  echo "==== mode $mode ${flags[*]}"
  "$bundle/run" with_daemon --copy-log "$out/$mode.daemon.log" --daemon "$bundle/bin/transposed" \
    --backend cuda --tune-budget 10 "${flags[@]}" -- \
    env -u LD_LIBRARY_PATH PYTHONPATH="$bundle/python" PYTHONUNBUFFERED=1 \
    POLITE_OUT="$out/$mode.json" python3 "$here/polite_gpu.py" || status=1
  if [ -f "$out/$mode.json" ]; then
    python3 - "$out/$mode.json" <<'PY' || status=1
import json, sys
r = json.load(open(sys.argv[1]))
print(f"loss {r['loss_mean_pct']:.2f}% (mean {r['with_tunes_gbps_mean']:.0f} vs {r['alone_gbps_mean']:.0f} GB/s), "
      f"worst window {r['worst_window_loss_pct']:.1f}%, all tuned {r['all_tuned_after_idle_s']} s after idle")
sys.exit(0 if r["loss_mean_pct"] < 5 and r["all_tuned_after_idle_s"] is not None else 1)
PY
  fi
done
echo "python/bench/polite_gpu.sh: status $status"
exit $status
