#!/usr/bin/env bash
# Where a kernel's time goes in L2 (docs/lab/benchmark.md, "the L2 fabric"): ncu on one
# configuration of one problem, the L2 partition-fabric, DRAM and issue activity and the L2
# sectors read and written by the SMs. On the GPU machine:
#   bash bench/ncu_l2.sh BUNDLE "12007x7001 f32" tile128x32.rows16.pad1 [OUTDIR]
# BUNDLE/run transpose_bench must exist (deploy/gpu.sh bundle). ncu locks the clocks: compare
# the rows of one run, not its durations with the benchmark's.
set -uo pipefail
bundle=${1:?usage: ncu_l2.sh BUNDLE PROBLEM CONFIG [OUTDIR]}
problem=${2:?problem spec, e.g. "12007x7001 f32"}
config=${3:?configuration name}
out=${4:-.}
metrics=gpu__time_duration.sum,lts__ltcfabric2ltc_cycles_active.avg.pct_of_peak_sustained_elapsed
metrics+=,dram__cycles_active.avg.pct_of_peak_sustained_elapsed
metrics+=,smsp__issue_active.avg.pct_of_peak_sustained_elapsed
metrics+=,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_write.sum
metrics+=,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,launch__registers_per_thread
metrics+=,breakdown:lts__throughput.avg.pct_of_peak_sustained_elapsed
mkdir -p "$out"
log="$out/ncu_$(echo "$problem.$config" | tr ' ' _).log"
# --launch-skip 4: past the correctness check's launches, onto a timed one.
timeout 300 ncu --metrics "$metrics" -k "regex:^(Tile|PackedRealign|Skinny)" -c 1 --launch-skip 4 \
  "$bundle/run" transpose_bench --problem "$problem" --config "$config" --samples 3 > "$log" 2>&1
rc=$?
echo "== $problem $config (ncu exit $rc, $log)"
grep -E "^\s+(lts|dram|gpu|smsp|l1tex|launch)__" "$log" | sed 's/  */ /g'
exit $rc
