#!/usr/bin/env python3
"""Markdown tables from transpose_bench --random's --csv output: one row per problem (class,
copy GB/s, cuBLAS geam, our best, tuned, configuration) and a summary per element size (median
and worst share of the same-run cudaMemcpy D2D, all problems and those of 64 MiB or more, the
ratio tuned / cuBLAS and ours / cuBLAS where geam applies).  usage: random_to_md.py random.csv"""
import csv
import statistics
import sys


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    rows = {}
    order = []
    seed = ""
    with open(sys.argv[1]) as f:
        for r in csv.DictReader(f):
            p = r["problem"]
            if p not in rows:
                order.append(p)
                rows[p] = {"kind": r["kind"], "elem": 0, "bytes": int(r["bytes"])}
            seed = r.get("seed", seed)
            rows[p][r["method"]] = r
    sizes = {"u8": 1, "i8": 1, "bf16": 2, "f16": 2, "f32": 4, "i32": 4, "f64": 8, "c64": 8,
             "i64": 8, "c128": 16}
    print("seed %s\n" % seed)
    print("| problem | class | MiB | copy GB/s | cuBLAS geam | ours (best) | tuned | tuned configuration |")
    print("|---|---|---:|---:|---:|---:|---:|---|")
    per = {}
    for p in order:
        d = rows[p]
        dtype = d["memcpy"]["dtype"]
        e = sizes.get(dtype, 0)

        def cell(m):
            r = d.get(m)
            if not r or float(r["gbps"]) <= 0:
                return "-" if not r else "failed"
            return "%.0f (%.1f%%)" % (float(r["gbps"]), float(r["pct_of_copy"]))

        t, fam, g = d.get("tuned"), d.get("family_best"), d.get("cublas_geam")
        print("| %s | %s | %.0f | %.0f | %s | %s | %s | `%s` |" % (
            p, d["kind"], d["bytes"] / 2**20, float(d["memcpy"]["gbps"]), cell("cublas_geam"),
            cell("family_best"), cell("tuned"), t["config"] if t else ""))
        a = per.setdefault(e, {"tuned": [], "t64": [], "odd64": [], "vs_geam": [],
                               "ours_vs_geam": []})
        if t and float(t["gbps"]) > 0:
            a["tuned"].append(float(t["pct_of_copy"]))
            if d["bytes"] >= 64 * 2**20:
                a["t64"].append(float(t["pct_of_copy"]))
                if d["kind"] == "odd":
                    a["odd64"].append(float(t["pct_of_copy"]))
            if g and float(g["gbps"]) > 0:
                a["vs_geam"].append(float(g["median_us"]) / float(t["median_us"]))
                a["ours_vs_geam"].append(float(g["median_us"]) / float(fam["median_us"]))
    print("\n| element size | problems | tuned median | tuned worst | >= 64 MiB median | "
          ">= 64 MiB worst | odd >= 64 MiB: median / worst (n) | tuned / geam (min) | "
          "ours / geam (min) |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for e in sorted(per):
        a = per[e]
        med = lambda v: "%.1f%%" % statistics.median(v) if v else "-"
        low = lambda v: "%.1f%%" % min(v) if v else "-"
        ratio = lambda v: "%.3f (%d)" % (min(v), len(v)) if v else "-"
        odd = "%s / %s (%d)" % (med(a["odd64"]), low(a["odd64"]), len(a["odd64"]))
        print("| %d | %d | %s | %s | %s | %s | %s | %s | %s |" % (
            e, len(a["tuned"]), med(a["tuned"]), low(a["tuned"]), med(a["t64"]), low(a["t64"]),
            odd, ratio(a["vs_geam"]), ratio(a["ours_vs_geam"])))


if __name__ == "__main__":
    main()
