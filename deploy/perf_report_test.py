#!/usr/bin/env python3
"""perf_report.py's extraction, on a run output made here: a deploy/gpu.sh run directory with the
files the GPU scripts write (kernels/bench.log and bench.csv, kernels/random.csv,
python/python_gpu.json, user_path/user_path.json, backend/tune_eval.csv, polite/duty.json,
fleet/fleet.json, first_answer/first_answer.json, kernels/answer_eval.log, run.txt) packed into
logs.tar.gz as gpu.sh packs it. Checks that the device, driver, commit and figures land in
<gpu>.json and on the rendered page, and that a page edited by hand fails `render --check`.
CTest perf_report_extract (label unit).
"""
import json
import os
import subprocess
import sys
import tarfile
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "perf_report.py")
HEAD = ("problem,kind,dtype,rows,cols,batch,ld_in,ld_out,bytes,method,config,median_us,min_us,"
        "gbps,pct_of_copy,samples,buffers,seed,error\n")


def row(problem, kind, dtype, nbytes, method, config, gbps, pct, seed=""):
    return (f'"{problem}",{kind},{dtype},1,1,1,1,1,{nbytes},{method},{config},1.0,1.0,{gbps},'
            f"{pct},200,4,{seed},\n")


FILES = {
    "run.txt": "commit=1234abc\nstatus=PASSED\ndate=2026-11-27T12:00:00Z\n",
    "kernels/bench.log": (
        "date: 2026-11-27T11:21:34Z\n"
        "name, driver_version, memory.total [MiB], clocks.max.sm [MHz], clocks.max.memory [MHz]\n"
        "NVIDIA H200, 580.159.04, 143771 MiB, 1980 MHz, 3201 MHz\n"
        "device: NVIDIA H200, sm_90, 132 SMs, L2 60.0 MiB, 139.8 GiB, memory clock 3201 MHz x "
        "6016 bit, CUDA driver 13000, runtime 13000\n"
        "cuBLAS: cuBLAS 13.1.0 (libcublas.so.13)\n"
        "cuTENSOR: libcutensor not found (libcutensor.so.2, libcutensor.so)\n"),
    "kernels/bench.csv": HEAD
    + row("8192x8192 f32", "fixed", "f32", 268435456, "memcpy", "D2D", 4000.0, 100.0)
    + row("8192x8192 f32", "fixed", "f32", 268435456, "cublas_geam", "cublas.geam", 3600.0, 90.0)
    + row("8192x8192 f32", "fixed", "f32", 268435456, "family_best", "tile64x64.rows8", 3880.0, 97.0)
    + row("8192x8192 f32", "fixed", "f32", 268435456, "tuned", "tile64x64.rows8", 3880.0, 97.0),
    "kernels/random.csv": HEAD
    + row("777x99999 u8", "odd", "u8", 77699223, "memcpy", "D2D", 3000.0, 100.0, seed="42")
    + row("777x99999 u8", "odd", "u8", 77699223, "family_best", "tile64x256", 2400.0, 80.0, seed="42")
    + row("777x99999 u8", "odd", "u8", 77699223, "tuned", "tile64x256", 2400.0, 80.0, seed="42"),
    "python/python_gpu.json": json.dumps({
        "torch": "2.11.0+cu130", "speed": [{
            "problem": "8192x8192 float32", "variant": "tile64x64.rows8", "tuned_gbps": 3870.0,
            "transpose_gbps": 3860.0, "torch_gbps": 1000.0, "bit_exact": True}]}),
    "user_path/user_path.json": json.dumps({
        "meta": {"seed": "7", "date": "2026-11-27 11:30 UTC"},
        "python": [{"problem": "4096x14336 bf16", "label": "llm-weight", "mib": 112.0,
                    "variant": "tile128x128", "stored_gbps": 3800.0, "py_per_call_gbps": 3781.0,
                    "torch_t_contiguous_gbps": 600.0, "torch_clone_gbps": 3900.0}],
        "cpp": {"host_us_256_f32": 3.44, "results": [
            {"problem": "4096x14336 bf16", "per_call_gbps": 3799.0}]},
        "host": {"calls": 2000, "transposed.transpose(x, out=o)": 6.61},
        "hits": {"idle_p50_ms": 0.37, "idle_p99_ms": 0.68, "tune_p50_ms": 0.41,
                 "tune_p99_ms": 0.65, "hits_during_tune": 722}}),
    "backend/tune_eval.csv": (
        "problem,bytes,candidates,tune_s,pick,pick_gbps,ceiling_gbps,pick_pct_ceiling,"
        "exhaustive_s,exhaustive_best,exhaustive_best_gbps,pick_gbps_in_exhaustive,"
        "pick_vs_best_pct,within_2pct,kind,elem,seed,repeat,variant\n"
        "8192x8192 f32,268435456,31,0.563,a,1,1,1,2,a,1,1,99.50,yes,fixed,4,0,0,default\n"
        "4097x3001 f16,24590194,17,0.251,b,1,1,1,2,c,1,1,97.00,no,fixed,2,0,0,default\n"),
    "polite/duty.json": json.dumps({
        "loss_mean_pct": 1.04, "worst_window_loss_pct": 6.2, "tuned_during_job": 0,
        "first_answer_sources": ["SOURCE_HEURISTIC"] * 6, "asked_to_idle_s": 12.5,
        "all_tuned_after_idle_s": 4.04}),
    "first_answer/first_answer.json": json.dumps({
        "seed": 7, "n": 2, "median": 0.95, "p10": 0.9, "worst": 0.9, "at_least_0_9": 2,
        "rows": [{"problem": "100x7 f32", "ratio": 1.0}, {"problem": "9x10877 i16", "ratio": 0.9}]}),
    "kernels/answer_eval.log": (
        "answer_eval: 43 problems (store of 4, seed 1), ANSWER_NOW answer / tuned winner: median "
        "0.5, p10 0.5, worst 0.5 (x); 1/43 >= 0.9; 2 nearest, 41 heuristic; 0 skipped\n"
        "answer_eval: 43 problems (cold store), ANSWER_NOW answer / tuned winner: median 0.999, "
        "p10 0.979, worst 0.870 (22784x1600 u8); 42/43 >= 0.9; 0 nearest, 43 heuristic\n"),
    "fleet/fleet.json": json.dumps({
        "problems": ["a", "b", "c"], "measured_on": {"a": "idle node", "b": "idle node",
                                                     "c": "busy node"},
        "all_stored_after_ask_s": 3.26, "loss_mean_pct": 0.31, "worst_window_loss_pct": 2.04,
        "failures": ["measured elsewhere than on the idle node: ['c']"]}),
}


def run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True)


def main():
    failures = []

    def expect(cond, what):
        if not cond:
            failures.append(what)

    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "OUT")
        for name, text in FILES.items():
            os.makedirs(os.path.dirname(os.path.join(out, name)), exist_ok=True)
            with open(os.path.join(out, name), "w") as f:
                f.write(text)
        with tarfile.open(os.path.join(tmp, "logs.tar.gz"), "w:gz") as t:
            for name in FILES:
                t.add(os.path.join(out, name), arcname=name)
        inputs = os.path.join(tmp, "inputs")
        r = run("extract", os.path.join(tmp, "logs.tar.gz"), "--into", inputs)
        expect(r.returncode == 0, f"extract exited {r.returncode}: {r.stderr}")
        path = os.path.join(inputs, "h200.json")
        expect(os.path.exists(path), "extract did not write h200.json (GPU key from the name)")
        if failures:
            print("\n".join(failures))
            return 1
        d = json.load(open(path))
        m = d["meta"]
        expect(m["device"] == "NVIDIA H200", f"device {m['device']!r}")
        expect(m["driver"] == "580.159.04", f"driver {m['driver']!r}")
        expect(m["commit"] == "1234abc", f"commit {m['commit']!r} (run.txt)")
        expect(m["status"] == "PASSED", f"status {m.get('status')!r}")
        expect(m["cublas"] == "13.1.0" and m["cutensor"] == "none", f"libraries {m}")
        expect(m["date_utc"] == "2026-11-27 11:21", f"date {m['date_utc']!r}")
        f = d["fixed"]
        expect(len(f) == 1 and f[0]["copy_gbps"] == 4000.0 and f[0]["geam_gbps"] == 3600.0
               and f[0]["ours_gbps"] == 3880.0 and f[0]["tuned_config"] == "tile64x64.rows8",
               f"fixed {f}")
        rnd = d["random"]
        expect(rnd["seed"] == "42" and rnd["problems"][0]["elem"] == 1
               and rnd["problems"][0]["geam_gbps"] is None, f"random {rnd}")
        expect(d["torch"][0]["torch_gbps"] == 1000.0, f"torch {d['torch']}")
        u = d["user_path"]
        expect(u["problems"][0]["cpp_gbps"] == 3799.0 and u["host_us"] == {
            "transposed.transpose(x, out=o)": 6.6, "C++ Transposer::Transpose": 3.4},
            f"user path {u}")
        po = d["polite"]
        expect(po["modes"]["duty"]["stored_after_ask_s"] == 16.5 and "wait" not in po["modes"]
               and po["fleet"]["on_idle_node"] == 2 and len(po["fleet"]["failures"]) == 1,
               f"polite {po}")
        fa = d["first_answer"]
        expect(fa["daemon"]["worst_problem"] == "9x10877 i16" and fa["daemon"]["seed"] == 7
               and fa["offline"] == {"problems": 43, "median": 0.999, "p10": 0.979,
                                     "worst": 0.87, "worst_problem": "22784x1600 u8",
                                     "at_least_0_9": 42}, f"first answer {fa}")
        t = d["tune"]
        expect(t == {"problems": 2, "within_2pct": 1, "worst_pick_vs_exhaustive_pct": 97.0,
                     "median_tune_s": 0.407, "max_tune_s_up_to_1gib": 0.563}, f"tune {t}")
        # An explicit --commit wins over run.txt.
        r = run("extract", out, "--into", inputs, "--commit", "feedbee")
        expect(json.load(open(path))["meta"]["commit"] == "feedbee", "--commit not used")

        page = os.path.join(tmp, "performance.md")
        r = run("render", "--inputs", inputs, "--out", page)
        expect(r.returncode == 0, f"render exited {r.returncode}: {r.stderr}")
        text = open(page).read()
        for needle in ["| [NVIDIA H200](#nvidia-h200) | 2026-11-27 11:21 | feedbee | 97.0% |",
                       "| 8192x8192 f32 | 256 | 4000 | 3600 (90%) | 3880 (97%) | 3880 (97%) |",
                       "| 1 | 1 | 80.0% | 80.0% | 80.0% | 80.0% | - |",
                       "| 8192x8192 float32 | `tile64x64.rows8` | 3870 | 3860 | 1000 | 3.86x |",
                       "3781 (0.99) | 3799 (1.00) | 600 (0.16) | 3900 (1.03) |",
                       "1 of 2 fast picks within 2%", "driver 580.159.04",
                       "| one node, duty cycle (default) | 6 | 1.0% / 6.2% | 0 | 16.5 s (4.0 s "
                       "after the job went idle) |",
                       "| two nodes: the idle one tunes | 3 | 0.3% / 2.0% | 2 (on the idle node) "
                       "| 3.3 s |",
                       "seed 7) | 2 | 0.950 | 0.900 | 0.900 (9x10877 i16) | 2 |",
                       "cold store) | 43 | 0.999 | 0.979 | 0.870 (22784x1600 u8) | 42 |"]:
            expect(needle in text, f"page lacks {needle!r}")
        r = run("render", "--inputs", inputs, "--out", page, "--check")
        expect(r.returncode == 0, f"--check of a fresh page exited {r.returncode}")
        with open(page, "a") as fh:
            fh.write("edited by hand\n")
        r = run("render", "--inputs", inputs, "--out", page, "--check")
        expect(r.returncode == 1 and "edited by hand" in r.stdout,
               f"--check of an edited page exited {r.returncode}")
    print("\n".join(failures) if failures else "perf_report_test: passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
