#!/usr/bin/env python3
"""Share of the copy per (problem, configuration) from transpose_bench --all-csv files, as one
markdown table: a row per configuration, a column per problem, the best of the files where a
pair was measured in several (rounds); the best row of each column in bold.
  python3 bench/pivot_configs.py a.csv [b.csv ...]"""
import csv
import sys


def main(paths):
    best, problems, configs = {}, [], []
    for path in paths:
        with open(path, newline="") as f:
            for r in csv.DictReader(f):
                if r["method"] != "family" and r["config"] != "copy":
                    continue
                if r["error"] or not r["pct_of_copy"]:
                    continue
                p, c, v = r["problem"], r["config"], float(r["pct_of_copy"])
                if p not in problems:
                    problems.append(p)
                if c not in configs:
                    configs.append(c)
                best[(p, c)] = max(v, best.get((p, c), 0.0))
    top = {p: max((v for (q, _), v in best.items() if q == p), default=0.0) for p in problems}
    print("| configuration | " + " | ".join(problems) + " |")
    print("| --- |" + " ---: |" * len(problems))
    for c in configs:
        cells = []
        for p in problems:
            v = best.get((p, c))
            cells.append("-" if v is None else (f"**{v:.1f}**" if v == top[p] else f"{v:.1f}"))
        print(f"| `{c}` | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
