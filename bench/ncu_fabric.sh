#!/usr/bin/env bash
# Where an odd shape's time goes at the GPU's own clocks (docs/design/kernel-family.md, "Odd 1-
# and 2-byte rows on the H200"): ncu on one configuration of one problem, clocks not locked:
# speed of light, occupancy and its limits, the L2 partition-fabric and DRAM activity, the L2
# sectors read and written by the SMs, the global sectors per request (L1), the launch's waves,
# and the sampled stall reasons. On the GPU machine:
#   bash bench/ncu_fabric.sh BUNDLE "9261x53861 u8" tile128x128.rows8.vec16.realign2.swz [OUTDIR]
# The kernel is the configuration's own (our kernel names start in upper case, cuBLAS's in
# lower: cublas.geam is profiled as "regex:^[a-z_]"). BUNDLE/run transpose_bench must exist
# (deploy/gpu.sh bundle).
set -uo pipefail
bundle=${1:?usage: ncu_fabric.sh BUNDLE PROBLEM CONFIG [OUTDIR]}
problem=${2:?problem spec, e.g. "9261x53861 u8"}
config=${3:?configuration name}
out=${4:-.}
case "$config" in
  cublas.*) kernel="regex:^[a-z_]" ;;
  *) kernel="regex:^(Tile|PackedRealign|Skinny)" ;;
esac
metrics=lts__ltcfabric2ltc_cycles_active.avg.pct_of_peak_sustained_elapsed
metrics+=,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_write.sum
metrics+=,dram__bytes_read.sum,dram__bytes_write.sum
metrics+=,sm__warps_active.avg.pct_of_peak_sustained_active
metrics+=,smsp__pcsamp_warps_issue_stalled_barrier,smsp__pcsamp_warps_issue_stalled_long_scoreboard
metrics+=,smsp__pcsamp_warps_issue_stalled_short_scoreboard
metrics+=,smsp__pcsamp_warps_issue_stalled_mio_throttle,smsp__pcsamp_warps_issue_stalled_lg_throttle
metrics+=,smsp__pcsamp_warps_issue_stalled_drain,smsp__pcsamp_warps_issue_stalled_wait
metrics+=,smsp__pcsamp_warps_issue_stalled_selected,smsp__pcsamp_warps_issue_stalled_not_selected
metrics+=,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum
metrics+=,l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum,l1tex__t_requests_pipe_lsu_mem_global_op_st.sum
mkdir -p "$out"
log="$out/ncu_fabric_$(echo "$problem.$config" | tr ' ' _).log"
# --launch-skip 4: past the correctness check's launches, onto a timed one.
timeout 300 ncu --clock-control none --section SpeedOfLight --section Occupancy \
  --section LaunchStats --section WarpStateStats --metrics "$metrics" -k "$kernel" -c 1 \
  --launch-skip 4 "$bundle/run" transpose_bench --problem "$problem" --config "$config" \
  --samples 3 > "$log" 2>&1
rc=$?
echo "== $problem $config (ncu exit $rc, $log)"
grep -E "family_best|cublas_geam |dram__bytes|ltcfabric|lts__t_sectors|l1tex__t_(sectors|requests)|warps_active|stalled|SM Frequency|DRAM Throughput|Duration|Registers Per|Shared Memory Per Block|Block Limit (Reg|Shared)|Achieved Occ|Waves Per SM|Grid Size|Block Size" \
  "$log" | sed 's/  */ /g'
exit $rc
