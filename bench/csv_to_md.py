#!/usr/bin/env python3
"""Markdown summary table from transpose_bench's --csv output (GB/s and % of the same-run
device-to-device copy).  usage: csv_to_md.py bench.csv"""
import csv
import sys

METHODS = ["cublas_geam", "naive", "tile", "tile_padded", "family_best", "tuned"]


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    order, cells, copy, best = [], {}, {}, {}
    with open(sys.argv[1]) as f:
        for r in csv.DictReader(f):
            p = r["problem"]
            if p not in order:
                order.append(p)
            ok = float(r["gbps"]) > 0
            if r["method"] == "memcpy":
                copy[p] = float(r["gbps"])
            elif r["method"] in METHODS:
                cells[(p, r["method"])] = (
                    "%.0f (%.0f%%)" % (float(r["gbps"]), float(r["pct_of_copy"])) if ok else "failed")
                if r["method"] == "tuned":
                    best[p] = r["config"]
    print("| problem | memcpy D2D GB/s | cuBLAS geam | naive | tile (pad0) | padded tile | "
          "family best (ours) | tuned (ours + cuBLAS) | tuned configuration |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for p in order:
        row = [cells.get((p, m), "-") for m in METHODS]
        print("| %s | %.0f | %s | `%s` |" % (p, copy.get(p, 0), " | ".join(row), best.get(p, "")))


if __name__ == "__main__":
    main()
