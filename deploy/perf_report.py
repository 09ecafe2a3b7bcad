#!/usr/bin/env python3
"""docs/performance.md, generated from GPU runs, so that the page cannot drift from the code.

Two steps:

  perf_report.py extract OUTDIR [--into DIR] [--commit C]
      OUTDIR is what `deploy/gpu.sh run OUTDIR` wrote (its logs.tar.gz alone is enough). Reads the
      benchmark's CSVs (kernels/bench.csv, kernels/random.csv), the Python package's figures
      against torch (python/python_gpu.json), the user-path benchmark (user_path/user_path.json),
      the search evaluation (backend/tune_eval.csv, tune_random.csv), polite tuning and the fleet
      (polite/<mode>.json, fleet/fleet.json) and the run's identity
      (kernels/bench.log: date, nvidia-smi, device line, cuBLAS; run.txt: commit and status,
      written by deploy/gpu.sh) and writes the small machine-readable input of the page,
      DIR/<gpu>.json (gpu: h100, h200... from the device name; DIR default docs/performance).
      deploy/gpu.sh run calls it at its end with --into OUTDIR/performance.
  perf_report.py render [--inputs DIR] [--out FILE] [--check]
      Writes the page (default docs/performance.md) from every DIR/*.json; --check instead
      compares and exits 1 with a diff if the committed page differs (CTest performance_page).

No third-party modules: the device machine's python3 and Debian's are enough. Thread-safety: a
command-line program, single-threaded.
"""
import argparse
import csv
import difflib
import io
import json
import os
import re
import statistics
import sys
import tarfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FORMAT = 1
ELEM = {"i8": 1, "u8": 1, "f16": 2, "bf16": 2, "i16": 2, "f32": 4, "i32": 4, "f64": 8,
        "i64": 8, "c64": 8, "c128": 16}
BIG = 64 << 20  # "large": 64 MiB of input or more


# ----------------------------------------------------------------------------------- extract
class Run:
    """The files of one `deploy/gpu.sh run` output, from its directory or its logs.tar.gz."""

    def __init__(self, path):
        self.files = {}
        tar = path if path.endswith(".tar.gz") else os.path.join(path, "logs.tar.gz")
        if os.path.isfile(tar):
            with tarfile.open(tar) as t:
                for m in t.getmembers():
                    if m.isfile():
                        self.files[os.path.normpath(m.name)] = t.extractfile(m).read().decode(
                            "utf-8", "replace")
        if os.path.isdir(path):  # files beside the tarball (run.txt) or an unpacked run
            for d, _, names in os.walk(path):
                for n in names:
                    full = os.path.join(d, n)
                    rel = os.path.normpath(os.path.relpath(full, path))
                    if rel not in self.files and not n.endswith((".gz", ".png")):
                        with open(full, encoding="utf-8", errors="replace") as f:
                            self.files[rel] = f.read()

    def text(self, name):
        return self.files.get(os.path.normpath(name))

    def csv(self, name):
        t = self.text(name)
        return list(csv.DictReader(io.StringIO(t))) if t else []

    def json(self, name):
        t = self.text(name)
        return json.loads(t) if t else None


def r1(x):
    return None if x is None else round(float(x), 1)


def gbps(row):
    """GB/s of a CSV row, None where it failed or is absent."""
    if not row or float(row["gbps"]) <= 0:
        return None
    return r1(row["gbps"])


def by_problem(rows):
    order, table = [], {}
    for r in rows:
        p = r["problem"]
        if p not in table:
            order.append(p)
            table[p] = {}
        table[p][r["method"]] = r
    return [(p, table[p]) for p in order]


def gpu_key(name):
    m = re.search(r"\b([A-Z]{1,3}\d{2,4}[A-Za-z]*)\b", name.replace("NVIDIA", ""))
    return m.group(1).lower() if m else re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def extract_meta(run, commit, note=None):
    meta = {"command": "deploy/gpu.sh run OUTDIR"}
    log = run.text("kernels/bench.log") or ""
    m = re.search(r"^date: (\S+)", log, re.M)
    if m:
        meta["date_utc"] = m.group(1).replace("T", " ").replace("Z", "")[:16]
    lines = log.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("name, driver_version") and i + 1 < len(lines):
            cells = [c.strip() for c in lines[i + 1].split(",")]
            meta["device"], meta["driver"] = cells[0], cells[1]
    m = re.search(r"^device: (.*)$", log, re.M)
    if m:
        meta["device_line"] = m.group(1)
        meta.setdefault("device", m.group(1).split(",")[0])
    m = re.search(r"^cuBLAS: cuBLAS (\S+)", log, re.M)
    meta["cublas"] = m.group(1) if m else "none"
    m = re.search(r"^cuTENSOR: (.*)$", log, re.M)
    meta["cutensor"] = "none" if not m or "not found" in m.group(1) else m.group(1)
    daemon = run.text("backend/daemon.log") or ""
    m = re.search(r"kernel library (\S+?)\)", daemon)
    if m:
        meta["library_version"] = m.group(1)
    py = run.json("python/python_gpu.json") or {}
    if py.get("torch"):
        meta["torch"] = py["torch"]
    info = dict(re.findall(r"^(\w+)=(.*)$", run.text("run.txt") or "", re.M))
    meta["commit"] = commit or info.get("commit") or "not recorded"
    if "status" in info:
        meta["status"] = info["status"]
    if note:
        meta["note"] = note
    return meta


def extract_fixed(run):
    out = []
    for p, m in by_problem(run.csv("kernels/bench.csv")):
        if "memcpy" not in m:
            continue
        t = m.get("tuned")
        out.append({"problem": p, "bytes": int(m["memcpy"]["bytes"]),
                    "copy_gbps": gbps(m["memcpy"]), "geam_gbps": gbps(m.get("cublas_geam")),
                    "ours_gbps": gbps(m.get("family_best")), "tuned_gbps": gbps(t),
                    "tuned_config": t["config"] if t else ""})
    return out


def extract_random(run):
    rows = run.csv("kernels/random.csv")
    out = {"seed": next((r["seed"] for r in rows if r.get("seed")), ""), "problems": []}
    for p, m in by_problem(rows):
        if "memcpy" not in m:
            continue
        t = m.get("tuned")
        out["problems"].append({
            "problem": p, "kind": m["memcpy"]["kind"], "elem": ELEM.get(m["memcpy"]["dtype"], 0),
            "bytes": int(m["memcpy"]["bytes"]), "copy_gbps": gbps(m["memcpy"]),
            "geam_gbps": gbps(m.get("cublas_geam")), "ours_gbps": gbps(m.get("family_best")),
            "tuned_gbps": gbps(t), "tuned_config": t["config"] if t else ""})
    return out


def extract_torch(run):
    py = run.json("python/python_gpu.json") or {}
    return [{"problem": s["problem"], "variant": s["variant"], "stored_gbps": r1(s["tuned_gbps"]),
             "transpose_gbps": r1(s["transpose_gbps"]), "torch_gbps": r1(s["torch_gbps"]),
             "bit_exact": bool(s.get("bit_exact"))} for s in py.get("speed", [])]


def extract_user_path(run):
    u = run.json("user_path/user_path.json")
    if not u:
        return None
    cpp = {c["problem"]: c for c in u.get("cpp", {}).get("results", [])}
    rows = []
    for p in u.get("python", []):
        c = cpp.get(p["problem"], {})
        rows.append({"problem": p["problem"], "label": p.get("label", ""), "mib": r1(p["mib"]),
                     "variant": p["variant"], "stored_gbps": r1(p["stored_gbps"]),
                     "python_gbps": r1(p["py_per_call_gbps"]),
                     "cpp_gbps": r1(c.get("per_call_gbps")),
                     "torch_t_contiguous_gbps": r1(p["torch_t_contiguous_gbps"]),
                     "torch_clone_gbps": r1(p["torch_clone_gbps"])})
    host = {k: round(v, 1) for k, v in u.get("host", {}).items() if k != "calls"}
    if u.get("cpp", {}).get("host_us_256_f32"):
        host["C++ Transposer::Transpose"] = round(u["cpp"]["host_us_256_f32"], 1)
    hits = {k: (round(v, 2) if isinstance(v, float) else v) for k, v in u.get("hits", {}).items()}
    return {"seed": u.get("meta", {}).get("seed", ""), "date_utc": u.get("meta", {}).get("date", ""),
            "problems": rows, "host_us": host, "hit_ms": hits}


def extract_tune(run):
    rows = run.csv("backend/tune_eval.csv") + run.csv("backend/tune_random.csv")
    rows = [r for r in rows if r.get("tune_s")]
    if not rows:
        return None
    up_to_gib = [float(r["tune_s"]) for r in rows if int(r["bytes"]) <= 1 << 30]
    return {"problems": len(rows),
            "within_2pct": sum(r["within_2pct"] == "yes" for r in rows),
            "worst_pick_vs_exhaustive_pct": round(min(float(r["pick_vs_best_pct"]) for r in rows), 2),
            "median_tune_s": round(statistics.median(float(r["tune_s"]) for r in rows), 3),
            "max_tune_s_up_to_1gib": round(max(up_to_gib), 3) if up_to_gib else None}


def extract_polite(run):
    """Polite tuning (python/bench/polite_gpu.sh: polite/<mode>.json) and the fleet
    (python/bench/fleet_gpu.sh: fleet/fleet.json, on a machine with 2 GPUs); None without either."""
    modes = {}
    for mode in ("duty", "wait"):
        r = run.json(f"polite/{mode}.json")
        if not r:
            continue
        after = r.get("all_tuned_after_idle_s")
        modes[mode] = {"loss_pct": r1(r["loss_mean_pct"]),
                       "worst_window_loss_pct": r1(r["worst_window_loss_pct"]),
                       "tuned_during_job": r.get("tuned_during_job"),
                       "problems": len(r.get("first_answer_sources", [])),
                       "stored_after_idle_s": r1(after),
                       "stored_after_ask_s": r1(r["asked_to_idle_s"] + after)
                       if after is not None else None}
    f = run.json("fleet/fleet.json")
    fleet = None
    if f:
        fleet = {"problems": len(f["problems"]),
                 "on_idle_node": sum(v == "idle node" for v in f["measured_on"].values()),
                 "stored_after_ask_s": r1(f["all_stored_after_ask_s"]),
                 "loss_pct": r1(f["loss_mean_pct"]),
                 "worst_window_loss_pct": r1(f["worst_window_loss_pct"]),
                 "failures": f.get("failures", [])}
    if not modes and not fleet:
        return None
    return {"modes": modes, "fleet": fleet}


ANSWER_EVAL_COLD = re.compile(
    r"answer_eval: (\d+) problems \(cold store\), ANSWER_NOW answer / tuned winner: "
    r"median ([\d.]+), p10 ([\d.]+), worst ([\d.]+) \(([^)]*)\); (\d+)/\d+ >= 0.9")


def extract_first_answer(run):
    """The first answer under ANSWER_NOW against the tuned winner: through a fresh daemon
    (python/bench/first_answer_gpu.sh: first_answer/first_answer.json) and offline over the
    benchmark's measured configurations (bench/answer_eval, cold store: kernels/answer_eval.log);
    None without either."""
    out = {}
    f = run.json("first_answer/first_answer.json")
    if f and f.get("rows"):
        worst = min(f["rows"], key=lambda r: r["ratio"])
        out["daemon"] = {"seed": f["seed"], "problems": f["n"], "median": round(f["median"], 3),
                         "p10": round(f["p10"], 3), "worst": round(f["worst"], 3),
                         "worst_problem": worst["problem"], "at_least_0_9": f["at_least_0_9"]}
    text = run.text("kernels/answer_eval.log") or ""
    m = None
    for m in ANSWER_EVAL_COLD.finditer(text):
        pass  # the last cold-store line
    if m:
        out["offline"] = {"problems": int(m.group(1)), "median": float(m.group(2)),
                          "p10": float(m.group(3)), "worst": float(m.group(4)),
                          "worst_problem": m.group(5), "at_least_0_9": int(m.group(6))}
    return out or None


def extract(args):
    run = Run(args.outdir)
    if "kernels/bench.csv" not in run.files:
        sys.exit(f"perf_report: no kernels/bench.csv in {args.outdir} (a deploy/gpu.sh run output "
                 "directory or its logs.tar.gz)")
    meta = extract_meta(run, args.commit, args.note)
    data = {"format": FORMAT, "gpu": gpu_key(meta.get("device", "unknown")), "meta": meta,
            "fixed": extract_fixed(run), "random": extract_random(run),
            "torch": extract_torch(run), "user_path": extract_user_path(run),
            "tune": extract_tune(run), "polite": extract_polite(run),
            "first_answer": extract_first_answer(run)}
    os.makedirs(args.into, exist_ok=True)
    path = os.path.join(args.into, data["gpu"] + ".json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"perf_report: {path} ({meta.get('device')}, {meta.get('date_utc')}, "
          f"{len(data['fixed'])} fixed, {len(data['random']['problems'])} random problems)")


# ------------------------------------------------------------------------------------ render
def cell(g, copy):
    if g is None:
        return "-"
    return f"{g:.0f} ({100 * g / copy:.0f}%)" if copy else f"{g:.0f}"


def mib(v):
    return f"{v:.0f}" if v >= 1 else f"{v:.2f}"


def pct(v):
    return f"{v:.1f}%" if v is not None else "-"


def median_or_none(v):
    return statistics.median(v) if v else None


def share(rows, key="tuned_gbps", big_only=False):
    return [100 * r[key] / r["copy_gbps"] for r in rows
            if r.get(key) and r.get("copy_gbps") and (not big_only or r["bytes"] >= BIG)]


def render_gpu(d):
    m, o = d["meta"], []
    name = m.get("device", d["gpu"])
    o.append(f"## {name}\n")
    facts = [f"driver {m.get('driver', '?')}", f"cuBLAS {m.get('cublas', 'none')}",
             f"cuTENSOR {m.get('cutensor', 'none')}"]
    if m.get("torch"):
        facts.append(f"torch {m['torch']}")
    o.append(f"{m.get('date_utc', '?')} UTC, commit {m.get('commit')}, kernel library "
             f"{m.get('library_version', '?')}; {', '.join(facts)}; `{m['command']}`"
             + (f" ({m['status']})" if m.get("status") else "") + ".")
    if m.get("device_line"):
        o.append(f"Device: {m['device_line']}.")
    if m.get("note"):
        o.append(f"Note: {m['note']}")
    o.append("")

    o.append("### Fixed problems: against the copy and cuBLAS\n")
    o.append("GB/s (share of the same-run `cudaMemcpy` D2D). *ours*: the best of the kernel family "
             "(every configuration bit-exact); *tuned*: the best of everything, `cublas.geam` "
             "included, which the daemon offers to value-exact requests only.\n")
    o.append("| problem | MiB | copy GB/s | cuBLAS geam | ours | tuned | tuned configuration |")
    o.append("|---|---:|---:|---:|---:|---:|---|")
    for r in d["fixed"]:
        c = r["copy_gbps"]
        o.append(f"| {r['problem']} | {r['bytes'] / 2**20:.0f} | {c:.0f} | "
                 f"{cell(r['geam_gbps'], c)} | {cell(r['ours_gbps'], c)} | "
                 f"{cell(r['tuned_gbps'], c)} | `{r['tuned_config']}` |")
    o.append("")

    rnd = d["random"]
    probs = rnd["problems"]
    o.append("### Seeded random shapes\n")
    if not probs:
        o.append("Not in this run.\n")
    else:
        o.append(f"{len(probs)} problems drawn by `transpose_bench --random {len(probs)} --seed "
                 f"{rnd['seed']}` (odd, aligned, skinny, batched and strided shapes, 16 MiB to "
                 "2 GiB); the same seed draws the same problems. Share of the same-run copy of "
                 "the tuned answer (ours + cuBLAS), per element size; *vs geam*: the lowest "
                 "ratio of our best kernel's bandwidth to cuBLAS geam's where geam applies "
                 "(f32, f64).\n")
        o.append("| element bytes | problems | median | worst | >= 64 MiB median | "
                 ">= 64 MiB worst | ours vs geam (min) |")
        o.append("|---:|---:|---:|---:|---:|---:|---:|")
        for e in sorted({r["elem"] for r in probs}):
            rs = [r for r in probs if r["elem"] == e]
            a, b = share(rs), share(rs, big_only=True)
            vs = [r["ours_gbps"] / r["geam_gbps"] for r in rs if r["geam_gbps"] and r["ours_gbps"]]
            o.append(f"| {e} | {len(rs)} | {pct(median_or_none(a))} | "
                     f"{pct(min(a) if a else None)} | {pct(median_or_none(b))} | "
                     f"{pct(min(b) if b else None)} | "
                     f"{f'{min(vs):.3f} ({len(vs)})' if vs else '-'} |")
        o.append("\n<details><summary>Every problem</summary>\n")
        o.append("| problem | class | MiB | copy GB/s | cuBLAS geam | ours | tuned | "
                 "tuned configuration |")
        o.append("|---|---|---:|---:|---:|---:|---:|---|")
        for r in probs:
            c = r["copy_gbps"]
            o.append(f"| {r['problem']} | {r['kind']} | {r['bytes'] / 2**20:.0f} | {c:.0f} | "
                     f"{cell(r['geam_gbps'], c)} | {cell(r['ours_gbps'], c)} | "
                     f"{cell(r['tuned_gbps'], c)} | `{r['tuned_config']}` |")
        o.append("\n</details>\n")

    o.append("### Against torch\n")
    if not d["torch"]:
        o.append("Not in this run.\n")
    else:
        o.append("`transposed.transpose(x, out=o)` against PyTorch's `x.t().contiguous()` on the "
                 "same tensor, and the figure the daemon stored when it tuned the problem "
                 "(`python/tests/test_gpu.py`: 20 calls back to back between CUDA events, median "
                 "of 5, best of interleaved rounds).\n")
        o.append("| problem | variant | stored GB/s | transposed.transpose | "
                 "x.t().contiguous() | vs torch |")
        o.append("|---|---|---:|---:|---:|---:|")
        for r in d["torch"]:
            o.append(f"| {r['problem']} | `{r['variant']}` | {r['stored_gbps']:.0f} | "
                     f"{r['transpose_gbps']:.0f} | {r['torch_gbps']:.0f} | "
                     f"{r['transpose_gbps'] / r['torch_gbps']:.2f}x |")
        o.append("")

    u = d.get("user_path")
    o.append("### The user path: Python and C++ callers against the stored figure\n")
    if not u:
        o.append("Not in this run.\n")
    else:
        o.append(f"`python/bench/bench_user_path.sh` ({u['date_utc']}, seed {u['seed']}: a fixed "
                 "list, then seeded random shapes), each problem pre-tuned, then called from Python "
                 "(`transposed.transpose(x, out=o)`) and C++ (`transposed::Transposer`): GB/s per "
                 "call (an event before each of N calls back to back) and its fraction of the "
                 "stored figure; torch's `x.t().contiguous()` and `clone()` (a copy of the same "
                 "bytes) on the same tensor.\n")
        o.append("| problem | MiB | variant | stored GB/s | Python | C++ | x.t().contiguous() | "
                 "clone() |")
        o.append("|---|---:|---|---:|---:|---:|---:|---:|")
        for r in u["problems"]:
            s = r["stored_gbps"]

            def f(g):
                return "-" if g is None else f"{g:.0f} ({g / s:.2f})"
            o.append(f"| {r['problem']} | {mib(r['mib'])} | `{r['variant']}` | {s:.0f} | "
                     f"{f(r['python_gbps'])} | {f(r['cpp_gbps'])} | "
                     f"{f(r['torch_t_contiguous_gbps'])} | {f(r['torch_clone_gbps'])} |")
        if u["host_us"]:
            o.append("\nHost cost of one call, 256x256 f32, 2000 calls back to back (us):\n")
            o.append("| call | us |")
            o.append("|---|---:|")
            for k in sorted(u["host_us"], key=lambda k: u["host_us"][k]):
                o.append(f"| `{k}` | {u['host_us'][k]:.1f} |")
        h = u["hit_ms"]
        if h:
            o.append(f"\nCache hits from the Python client: idle p50 {h['idle_p50_ms']:.2f} ms, p99 "
                     f"{h['idle_p99_ms']:.2f} ms; during a tune of another problem p50 "
                     f"{h['tune_p50_ms']:.2f} ms, p99 {h['tune_p99_ms']:.2f} ms "
                     f"({h['hits_during_tune']} hits served during the tune).")
        o.append("")

    t = d.get("tune")
    o.append("### Tune time and search quality\n")
    if not t:
        o.append("Not in this run.\n")
    else:
        o.append(f"`tune_eval` (the daemon's search on the benchmark problems and seeded random "
                 f"ones, against an exhaustive long measurement of every candidate): "
                 f"{t['within_2pct']} of {t['problems']} fast picks within 2% of the exhaustive "
                 f"winner (worst {t['worst_pick_vs_exhaustive_pct']}%); tune time median "
                 f"{t['median_tune_s']} s, slowest up to 1 GiB {t['max_tune_s_up_to_1gib']} s.\n")

    p = d.get("polite")
    if p:  # runs of a commit that has python/bench/polite_gpu.sh's figures extracted
        o.append("### A job beside the daemon's background tunes\n")
        o.append("A torch job streaming memory asks the daemon for new problems under `ANSWER_NOW` "
                 "(python/bench/polite_gpu.sh: one node, its tunes polite; "
                 "python/bench/fleet_gpu.sh: two GPUs, a daemon on each sharing a Redis store, the "
                 "job on GPU 0): the job's bandwidth lost over the run, and the time from the ask "
                 "until every problem is stored on the job's node ([design/polite.md]"
                 "(design/polite.md)).\n")
        o.append("| run | problems | job's loss (mean / worst window) | tuned while the job ran | "
                 "all stored after the ask |")
        o.append("|---|---:|---:|---:|---:|")
        names = {"duty": "one node, duty cycle (default)", "wait": "one node, wait for idle"}
        for mode, r in sorted(p["modes"].items()):
            o.append(f"| {names[mode]} | {r['problems']} | {pct(r['loss_pct'])} / "
                     f"{pct(r['worst_window_loss_pct'])} | {r['tuned_during_job']} | "
                     + (f"{r['stored_after_ask_s']:.1f} s ({r['stored_after_idle_s']:.1f} s "
                        "after the job went idle)" if r["stored_after_ask_s"] is not None
                        else "not all") + " |")
        fl = p.get("fleet")
        if fl:
            o.append(f"| two nodes: the idle one tunes | {fl['problems']} | {pct(fl['loss_pct'])} "
                     f"/ {pct(fl['worst_window_loss_pct'])} | {fl['on_idle_node']} (on the idle "
                     "node) | "
                     + (f"{fl['stored_after_ask_s']:.1f} s" if fl["stored_after_ask_s"] is not None
                        else "not all") + " |")
        o.append("")

    fa = d.get("first_answer")
    if fa:  # runs of a commit that has python/bench/first_answer_gpu.sh's figures extracted
        o.append("### The first answer against the tuned winner\n")
        o.append("What a job runs on while its problem's background tune waits: the `ANSWER_NOW` "
                 "answer's bandwidth over the tuned winner's, measured side by side "
                 "([lookups.md](lookups.md#how-good-the-first-answer-is)).\n")
        o.append("| set | problems | median | p10 | worst | >= 0.9 |")
        o.append("|---|---:|---:|---:|---:|---:|")
        rows = [("daemon", "through a fresh daemon (python/bench/first_answer_gpu.sh, seed {seed})"),
                ("offline", "offline over the benchmark's configurations (bench/answer_eval, "
                            "cold store)")]
        for key, label in rows:
            r = fa.get(key)
            if r:
                o.append(f"| {label.format(**r)} | {r['problems']} | {r['median']:.3f} | "
                         f"{r['p10']:.3f} | {r['worst']:.3f} ({r['worst_problem']}) | "
                         f"{r['at_least_0_9']} |")
        o.append("")
    return "\n".join(o)


HEADER = """\
# Performance

<!-- Generated by `python3 deploy/perf_report.py render` from docs/performance/*.json; do not
edit by hand (CTest `performance_page` fails when this page and its inputs differ). -->

What `transposed` gets on each GPU we measure, against the ceiling of the same run (a
`cudaMemcpy` device-to-device copy of the same bytes), cuBLAS `geam` and PyTorch, and what a
Python or C++ caller gets against the figure the daemon stored. Every number below comes from one
`deploy/gpu.sh run` per GPU, named with its device, driver, date and commit.

## Summary

| GPU | date (UTC) | commit | fixed >= 64 MiB: median of copy | random >= 64 MiB: median / worst | vs torch `x.t().contiguous()` (median) | Python >= 64 MiB: per call / stored (median) |
|---|---|---|---:|---:|---:|---:|
"""

METHOD = """\
## Method

- **Effective bandwidth** = 2 x bytes / median time (read once, written once; GB = 1e9 B).
- **The ceiling** is `cudaMemcpyAsync` device-to-device of the same bytes, measured in the same
  run through the same harness; *% of copy* is our bandwidth over it.
- **The harness** (`kernels/include/transposed/kernels/harness.h`, shared by the daemon's worker
  and the benchmark): input/output pairs rotated so that the working set exceeds 4x the L2,
  event-timed samples after warm-up, the median kept. Every configuration is first checked
  against a reference kernel on a poisoned output (bit-exact; cuBLAS value-exact) and never
  ranked if it fails. For a problem whose input/output pair exceeds 4 L2 sizes, runs of a commit
  that has `core/placements.h` take each figure (and the daemon its stored one) over 3 buffer
  placements, allocated while the earlier are held, as the median of their medians: one
  allocation's figure varied by 6% at 2 GiB on an H200
  ([design/kernel-family.md](design/kernel-family.md#buffers-the-h200-gap-at-2-gib)).
- **Seeded random shapes**: `transpose_bench --random N` draws odd, aligned, skinny, batched and
  strided problems of every element size from a seed; the seed is printed and repeats the draw.
- **torch** figures are PyTorch's own `x.t().contiguous()` (its transpose copy) and `clone()`
  (a plain copy of the same bytes) on the same tensors, timed the same way as the call beside it.
- The design of the kernel family and why its rows exist: [design/kernel-family.md](design/kernel-family.md).

## How to reproduce

```sh
deploy/gpu.sh bundle                          # any machine with nvcc: Release build for sm_90
deploy/gpu.sh run OUT                         # on the GPU node; ends with perf_report.py extract
cp OUT/performance/*.json docs/performance/   # the page's inputs (one file per GPU)
python3 deploy/perf_report.py render          # rewrites docs/performance.md
```

`SEED=S` (benchmark) and the user path's seed (printed) repeat the random draws.
"""


def summary_row(d):
    m = d["meta"]
    big = share(d["fixed"], big_only=True)
    rnd = share(d["random"]["problems"], big_only=True)
    vs = [r["transpose_gbps"] / r["torch_gbps"] for r in d["torch"] if r["torch_gbps"]]
    u = d.get("user_path") or {"problems": []}
    up = [r["python_gbps"] / r["stored_gbps"] for r in u["problems"]
          if r["python_gbps"] and r["stored_gbps"] and r["mib"] >= 64]
    return (f"| [{m.get('device', d['gpu'])}](#{anchor(m.get('device', d['gpu']))}) | "
            f"{m.get('date_utc', '?')} | {m.get('commit')} | {pct(median_or_none(big))} | "
            + (f"{pct(median_or_none(rnd))} / {pct(min(rnd))}" if rnd else "-") + " | "
            + (f"{statistics.median(vs):.2f}x" if vs else "-") + " | "
            + (f"{statistics.median(up):.2f}" if up else "-") + " |")


def anchor(title):
    return re.sub(r"[^a-z0-9 -]", "", title.lower()).replace(" ", "-")


def load_inputs(directory):
    out = []
    for n in sorted(os.listdir(directory)):
        if n.endswith(".json"):
            with open(os.path.join(directory, n), encoding="utf-8") as f:
                d = json.load(f)
            if d.get("format") != FORMAT:
                sys.exit(f"perf_report: {n}: format {d.get('format')}, this script reads {FORMAT}")
            out.append(d)
    return out


def render_page(inputs):
    page = HEADER + "\n".join(summary_row(d) for d in inputs) + "\n\n" + METHOD + "\n"
    return page + "\n".join(render_gpu(d) for d in inputs).rstrip("\n") + "\n"


def render(args):
    inputs = load_inputs(args.inputs)
    if not inputs:
        sys.exit(f"perf_report: no *.json in {args.inputs}")
    page = render_page(inputs)
    if args.check:
        old = open(args.out, encoding="utf-8").read() if os.path.exists(args.out) else ""
        if old != page:
            sys.stdout.writelines(difflib.unified_diff(
                old.splitlines(True), page.splitlines(True), args.out, "regenerated"))
            print(f"perf_report: {args.out} differs from what {args.inputs} generates; run "
                  "`python3 deploy/perf_report.py render` and commit the page", file=sys.stderr)
            return 1
        print(f"perf_report: {args.out} matches {len(inputs)} input(s)")
        return 0
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(page)
    print(f"perf_report: wrote {args.out} from {len(inputs)} input(s)")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("extract", help="a deploy/gpu.sh run output -> DIR/<gpu>.json")
    e.add_argument("outdir")
    e.add_argument("--into", default=os.path.join(ROOT, "docs", "performance"))
    e.add_argument("--commit", help="the commit the run's bundle was built from (else run.txt)")
    e.add_argument("--note", help="one sentence shown under the GPU's heading (how the run was made)")
    r = sub.add_parser("render", help="DIR/*.json -> docs/performance.md")
    r.add_argument("--inputs", default=os.path.join(ROOT, "docs", "performance"))
    r.add_argument("--out", default=os.path.join(ROOT, "docs", "performance.md"))
    r.add_argument("--check", action="store_true", help="compare instead of writing")
    args = ap.parse_args()
    return extract(args) if args.cmd == "extract" else render(args)


if __name__ == "__main__":
    sys.exit(main() or 0)
