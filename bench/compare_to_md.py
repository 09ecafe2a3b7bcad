#!/usr/bin/env python3
"""Before/after markdown tables from two builds of transpose_bench run on the same problems in
one run (the same --random N [--kind K] --seed S), from their --csv outputs: one row per problem
(direction for skinny problems, MiB, our best kernel before and after - the bench's own
family_best row, every non-vendor configuration: "ours" is the daemon's answer without cuBLAS
or cuTENSOR - with its share of the same-run cudaMemcpy D2D and its configuration), then the
median and worst share per element size (and direction).
Several seeds: give the pairs one after the other.
  usage: compare_to_md.py [--tall] BEFORE.csv AFTER.csv [BEFORE2 AFTER2 ...]
  --tall  skinny problems of the tall direction only (cols <= 16, dense input rows)"""
import collections
import csv
import statistics
import sys

SIZES = {"u8": 1, "i8": 1, "bf16": 2, "f16": 2, "f32": 4, "i32": 4, "f64": 8, "c64": 8,
         "i64": 8, "c128": 16}


def load(path):
    """problem -> (share %, configuration) of its family_best row; problem info; order."""
    best, info, order = {}, {}, []
    with open(path) as f:
        for r in csv.DictReader(f):
            # No family_best where none of our kernels passed its check (an empty configuration).
            if r["method"] != "family_best" or r["error"] or not r["config"]:
                continue
            p = r["problem"]
            order.append(p)
            cols, ld_in = int(r["cols"]), int(r["ld_in"])
            direction = ""
            if r["kind"] == "skinny":
                direction = "tall" if cols <= 16 and ld_in == cols else "wide"
            info[p] = (r["dtype"], direction, int(r["bytes"]) / 2**20, r.get("seed", ""))
            best[p] = (float(r["pct_of_copy"]), r["config"])
    return best, info, order


def main():
    args = sys.argv[1:]
    tall_only = "--tall" in args
    args = [a for a in args if a != "--tall"]
    if not args or len(args) % 2:
        sys.exit(__doc__)
    print("| problem | seed | direction | MiB | before: ours | configuration | after: ours | "
          "configuration |")
    print("|---|---|---|---:|---:|---|---:|---|")
    agg = collections.defaultdict(lambda: ([], []))
    for before_path, after_path in zip(args[0::2], args[1::2]):
        before, info, order = load(before_path)
        after, _, _ = load(after_path)
        for p in order:
            if p not in before or p not in after:
                continue
            dtype, direction, mib, seed = info[p]
            if tall_only and direction != "tall":
                continue
            b, a = before[p], after[p]
            print("| %s | %s | %s | %.0f | %.1f%% | `%s` | %.1f%% | `%s` |"
                  % (p, seed, direction or "-", mib, b[0], b[1], a[0], a[1]))
            agg[(dtype, direction)][0].append(b[0])
            agg[(dtype, direction)][1].append(a[0])
    print()
    print("| element | direction | problems | before: median / worst | after: median / worst |")
    print("|---|---|---:|---:|---:|")
    for key in sorted(agg, key=lambda k: (SIZES.get(k[0], 0), k[1])):
        b, a = agg[key]
        print("| %s | %s | %d | %.1f%% / %.1f%% | %.1f%% / %.1f%% |"
              % (key[0], key[1] or "-", len(b), statistics.median(b), min(b),
                 statistics.median(a), min(a)))


if __name__ == "__main__":
    main()
