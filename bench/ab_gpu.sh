#!/usr/bin/env bash
# A/B of two builds of transpose_bench on the GPU machine: the same problems and configurations,
# two alternating rounds (a b a b), the best share of the copy of each (problem, configuration)
# per build, then the best per problem. The before/after tables of docs/lab/benchmark.md come from it.
#   here:  build transpose_bench of both commits (deploy/gpu.sh bundle in a worktree of each, or
#          cmake --build build-gpu --target transpose_bench), copy them as bench_a (before) and
#          bench_b (after), and bundle them with the bundle tool:
#          ../shared/tools/bundle .gpu/ab bench_a bench_b
#   there: PROBLEMS="313x798x1009 u8;447x136x6171 bf16" CONFIG=realign2,tile64x64.rows8.pad4 \
#          bash bench/ab_gpu.sh .gpu/ab OUTDIR
# PROBLEMS: ';'-separated transpose_bench --problem specs; CONFIG: its --config substrings;
# BUILDS: the builds compared, "a b" by default ("a b c" with a bench_c: each against a).
set -uo pipefail
bundle=${1:?usage: ab_gpu.sh BUNDLE OUTDIR}
out=${2:?usage: ab_gpu.sh BUNDLE OUTDIR}
mkdir -p "$out"
{ date -u +"date: %Y-%m-%dT%H:%M:%SZ"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } | tee "$out/device.txt"
IFS=';' read -ra specs <<< "${PROBLEMS:?set PROBLEMS}"
args=()
for p in "${specs[@]}"; do args+=(--problem "$p"); done
[ -n "${CONFIG:-}" ] && args+=(--config "$CONFIG")
status=0
read -ra builds <<< "${BUILDS:-a b}"
for round in 1 2; do
  for v in "${builds[@]}"; do
    "$bundle/run" "bench_$v" "${args[@]}" --all-csv "$out/$v$round.csv" > "$out/$v$round.log" 2>&1 \
      || { echo "bench_$v round $round failed (see $out/$v$round.log)"; status=1; }
  done
done
python3 - "$out" "${builds[@]}" <<'PY'
import collections, csv, os, sys
out, builds = sys.argv[1], sys.argv[2:]
best = collections.defaultdict(dict)  # (problem, config) -> build -> best % of copy
for v in builds:
    for rnd in "12":
        path = f"{out}/{v}{rnd}.csv"
        if not os.path.exists(path):
            continue
        for r in csv.DictReader(open(path)):
            if r["method"] != "family" or r["error"]:
                continue
            k = (r["problem"], r["config"])
            best[k][v] = max(best[k].get(v, 0.0), float(r["pct_of_copy"]))
per_problem = collections.defaultdict(lambda: collections.defaultdict(float))
def row(x):
    a = x.get(builds[0], 0.0)
    return " ".join(f"{v} {x.get(v, 0.0):6.1f}" + ("" if v == builds[0] else
                    f" {x.get(v, 0.0) - a:+6.1f}") for v in builds)
for (p, c), x in sorted(best.items()):
    print(f"{p:32s} {c:44s} {row(x)}")
    for v in builds:
        per_problem[p][v] = max(per_problem[p][v], x.get(v, 0.0))
print("best per problem (% of the same-run cudaMemcpy D2D)")
for p, x in per_problem.items():
    print(f"  {p:32s} {row(x)}")
PY
exit $status
