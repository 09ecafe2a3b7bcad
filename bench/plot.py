#!/usr/bin/env python3
"""Bar chart of transpose_bench's CSV: each method's bandwidth as a share of the same-run
device-to-device copy, per problem.  usage: plot.py bench.csv out.png"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

METHODS = ["cublas_geam", "naive", "tile", "tile_padded", "family_best", "tuned"]
COLORS = {"cublas_geam": "#7f7f7f", "naive": "#d62728", "tile": "#ff7f0e",
          "tile_padded": "#bcbd22", "family_best": "#1f77b4", "tuned": "#2ca02c"}


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    problems, pct = [], {}
    with open(sys.argv[1]) as f:
        for row in csv.DictReader(f):
            if row["problem"] not in problems:
                problems.append(row["problem"])
            if row["method"] in METHODS and row["median_us"] and float(row["gbps"]) > 0:
                pct[(row["problem"], row["method"])] = float(row["pct_of_copy"])
    fig, ax = plt.subplots(figsize=(max(10, 0.9 * len(problems)), 5.5))
    width = 0.8 / len(METHODS)
    for k, m in enumerate(METHODS):
        xs = [i + (k - (len(METHODS) - 1) / 2) * width for i in range(len(problems))]
        ys = [pct.get((p, m), 0) for p in problems]
        ax.bar(xs, ys, width, label=m, color=COLORS[m])
    for y, style in ((95, "--"), (90, ":"), (80, "-.")):
        ax.axhline(y, color="k", linestyle=style, linewidth=0.8)
    ax.set_xticks(range(len(problems)))
    ax.set_xticklabels(problems, rotation=40, ha="right", fontsize=8)
    ax.set_ylabel("% of same-run cudaMemcpy D2D bandwidth")
    ax.set_ylim(0, 110)
    ax.set_title("Transpose effective bandwidth (2 x bytes / time) vs the copy ceiling")
    ax.legend(ncol=5, fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.32))
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=110)


if __name__ == "__main__":
    main()
