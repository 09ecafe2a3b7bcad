#!/usr/bin/env bash
# Why a kernel waits (docs/lab/benchmark.md, "Skinny kernels for 4 blocks per SM"): ncu on one
# configuration of one problem: speed of light (DRAM, SM), occupancy, launch statistics and the
# sampled warp stall reasons (barrier, long and short scoreboard, MIO and LG throttle). On the GPU
# machine:
#   bash bench/ncu_stalls.sh BUNDLE "86359294x9 u8" skinny.l2048.rows8 [OUTDIR]
# BUNDLE/run transpose_bench must exist (deploy/gpu.sh bundle). ncu locks the clocks: compare
# the rows of one run, not its durations with the benchmark's.
set -uo pipefail
bundle=${1:?usage: ncu_stalls.sh BUNDLE PROBLEM CONFIG [OUTDIR]}
problem=${2:?problem spec, e.g. "86359294x9 u8"}
config=${3:?configuration name}
out=${4:-.}
stalls=smsp__pcsamp_warps_issue_stalled_barrier
stalls+=,smsp__pcsamp_warps_issue_stalled_long_scoreboard
stalls+=,smsp__pcsamp_warps_issue_stalled_short_scoreboard
stalls+=,smsp__pcsamp_warps_issue_stalled_mio_throttle
stalls+=,smsp__pcsamp_warps_issue_stalled_lg_throttle
mkdir -p "$out"
log="$out/ncu_stalls_$(echo "$problem.$config" | tr ' ' _).log"
# --launch-skip 4: past the correctness check's launches, onto a timed one.
timeout 300 ncu --section SpeedOfLight --section WarpStateStats --section Occupancy \
  --section LaunchStats --section SchedulerStats --metrics "$stalls" \
  -k "regex:^(Tile|PackedRealign|Skinny)" -c 1 --launch-skip 4 \
  "$bundle/run" transpose_bench --problem "$problem" --config "$config" --samples 3 > "$log" 2>&1
rc=$?
echo "== $problem $config (ncu exit $rc, $log)"
grep -E "DRAM Throughput|Compute \(SM\) Throughput|Duration|Warp Cycles Per Issued|Achieved Occupancy|Registers Per Thread|No Eligible|pcsamp_warps_issue_stalled" "$log" | sed 's/  */ /g'
exit $rc
