#!/usr/bin/env bash
# L2 sectors over the ideal, per (problem, configuration): what a sector-exact tile is meant to
# move (docs/design/kernel-family.md, "Sector-exact walks"). For each pair, ncu (clocks not
# locked) profiles one timed launch of the configuration's kernel and the script prints the L2
# sectors read and written by the SMs over the ideal (the matrix's bytes / 32), the L2 fabric's
# busy share and the kernel's duration. On the GPU machine:
#   bash bench/ncu_sectors.sh BUNDLE OUTDIR "9261x53861 u8|tile128x128.rows4.vec16.realign2.swz" ...
# BUNDLE/run transpose_bench must exist (deploy/gpu.sh bundle). OUTDIR receives one ncu log per
# pair and sectors.md, the table.
set -uo pipefail
bundle=${1:?usage: ncu_sectors.sh BUNDLE OUTDIR "PROBLEM|CONFIG"...}
out=${2:?usage: ncu_sectors.sh BUNDLE OUTDIR "PROBLEM|CONFIG"...}
shift 2
mkdir -p "$out"
metrics=gpu__time_duration.sum,lts__ltcfabric2ltc_cycles_active.avg.pct_of_peak_sustained_elapsed
metrics+=,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_write.sum
metrics+=,dram__bytes_read.sum,dram__bytes_write.sum,launch__registers_per_thread
metrics+=,sm__warps_active.avg.pct_of_peak_sustained_active
table="$out/sectors.md"
echo "| problem | configuration | us | L2 fabric busy | L2 read / write sectors vs ideal | DRAM read / write vs ideal | registers | achieved occupancy |" > "$table"
echo "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |" >> "$table"
status=0
for pair in "$@"; do
  problem=${pair%%|*}
  config=${pair#*|}
  case "$config" in
    cublas.*) kernel="regex:^[a-z_]" ;;
    *) kernel="regex:^(Tile|PackedRealign|Skinny)" ;;
  esac
  log="$out/ncu_$(echo "$problem.$config" | tr ' =' '__').log"
  # --launch-skip 4: past the correctness check's launches, onto a timed one.
  timeout 300 ncu --clock-control none --metrics "$metrics" -k "$kernel" -c 1 --launch-skip 4 \
    "$bundle/run" transpose_bench --problem "$problem" --config "$config" --samples 3 \
    > "$log" 2>&1 || { echo "ncu failed on $problem $config ($log)"; status=1; continue; }
  python3 - "$problem" "$config" "$log" >> "$table" <<'PY' || status=1
import re, sys
problem, config, log = sys.argv[1:4]
sizes = {"u8": 1, "i8": 1, "f16": 2, "bf16": 2, "i16": 2, "f32": 4, "i32": 4, "f64": 8,
         "i64": 8, "c64": 8, "c128": 16}
shape, dtype = problem.split()[0], problem.split()[1]
n = 1
for d in shape.split("x"):
    n *= int(d)
ideal = n * sizes[dtype] / 32
text = open(log).read()
def metric(name):
    m = re.search(r"^\s*" + re.escape(name) + r"\s+(\S+)\s+([\d,.]+)", text, re.M)
    if not m:
        return None, None
    return m.group(1), float(m.group(2).replace(",", ""))
def scaled(name):
    unit, v = metric(name)
    if v is None:
        return None
    return v * {"Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "byte": 1, "usecond": 1,
                "msecond": 1e3, "nsecond": 1e-3, "Ksector": 1e3, "Msector": 1e6, "Gsector": 1e9}.get(unit, 1)
rd, wr = scaled("lts__t_sectors_srcunit_tex_op_read.sum"), scaled("lts__t_sectors_srcunit_tex_op_write.sum")
dr, dw = scaled("dram__bytes_read.sum"), scaled("dram__bytes_write.sum")
us = scaled("gpu__time_duration.sum")
fab = metric("lts__ltcfabric2ltc_cycles_active.avg.pct_of_peak_sustained_elapsed")[1]
regs = metric("launch__registers_per_thread")[1]
occ = metric("sm__warps_active.avg.pct_of_peak_sustained_active")[1]
if rd is None or wr is None:
    print(f"| {problem} | `{config}` | no ncu figures | | | | | |")
    sys.exit(1)
f = lambda x: "-" if x is None else f"{x:.3f}"
print(f"| {problem} | `{config}` | {us:.1f} | {fab:.1f}% | {rd / ideal:.3f} / {wr / ideal:.3f} | "
      f"{f(dr / 32 / ideal if dr else None)} / {f(dw / 32 / ideal if dw else None)} | {regs:.0f} | "
      f"{'-' if occ is None else f'{occ:.0f}%'} |")
PY
done
cat "$table"
exit $status
