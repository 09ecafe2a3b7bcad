"""The first answer through a real daemon (issue 26 item 5): how close the configuration a fresh
daemon answers at once under ANSWER_NOW comes to the winner its tune then stores, both measured
side by side by that tune.

Run under testing/with_daemon (TRANSPOSED_SERVER set, a fresh database) by
python/bench/first_answer_gpu.sh. Steps: the daemon tunes a few COMMON problems (a node that has
served a job or two); then it is asked, under ANSWER_NOW, for NEW problems drawn from a seeded
random set (FIRST_ANSWER_SEED, FIRST_ANSWER_N) and answers each at once (SOURCE_NEAREST or
SOURCE_HEURISTIC); then each new problem gets an exhaustive Tune (every candidate measured long,
in one session: the answered configuration among them), and the ratio is the answered
configuration's bandwidth over the winner's. The seed is fresh each run (printed first, and in
the JSON) unless FIRST_ANSWER_SEED or SEED sets it: a run's set is new problems for the rule, and
a printed seed reproduces it. FIRST_ANSWER_N (24) problems: about 1 s each on an H100 or H200. Prints one row per problem and a summary (median,
p10 = the value at index floor(0.1 * (n - 1)) of the ascending ratios, as bench/answer_eval does,
worst, how many reach 0.9); writes the JSON to $FIRST_ANSWER_OUT when set. Exit status 1 when a
call failed or an answered configuration was not among the measured candidates.
"""
import json
import math
import os
import random
import statistics
import sys
import time

import transposed

COMMON = [(4096, 4096, "f32", 1), (8192, 2048, "f16", 1), (2048, 8192, "bf16", 1),
          (3072, 3072, "u8", 1)]
DTYPES = ["f32", "f16", "bf16", "u8", "i16", "f64"]
ELEMENT = {"f32": 4, "f16": 2, "bf16": 2, "u8": 1, "i16": 2, "f64": 8}
MAX_BYTES = int(os.environ.get("FIRST_ANSWER_MAX_MIB", "64")) << 20


def draw(rng):
    """One random problem: log-uniform sides, a quarter of them skinny (a side of 2-256), some
    batched; at most MAX_BYTES (FIRST_ANSWER_MAX_MIB, 64)."""
    while True:
        dtype = rng.choice(DTYPES)
        sides = [int(2 ** rng.uniform(6, 13.5)) for _ in range(2)]
        if rng.random() < 0.25:
            sides[rng.randrange(2)] = int(2 ** rng.uniform(1, 8))
        batch = rng.choice([1, 1, 1, 2, 4, 8])
        if batch * sides[0] * sides[1] * ELEMENT[dtype] <= MAX_BYTES:
            return (sides[0], sides[1], dtype, batch)


def main():
    given = os.environ.get("FIRST_ANSWER_SEED") or os.environ.get("SEED")
    seed = int(given) if given else int.from_bytes(os.urandom(4), "little")
    n = int(os.environ.get("FIRST_ANSWER_N", "24"))
    print(f"first answer: seed {seed} ({'given' if given else 'fresh'}; SEED={seed} reproduces "
          f"the set), {n} problems", flush=True)
    budget = float(os.environ.get("FIRST_ANSWER_TUNE_BUDGET", "60"))
    rng = random.Random(seed)
    new = []
    while len(new) < n:
        p = draw(rng)
        if p not in COMMON and p not in new:
            new.append(p)
    c = transposed.Client(timeout=900)
    start = time.monotonic()
    for r, k, t, b in COMMON:
        c.get_config(r, k, t, batch=b)
    first = [c.get_config(r, k, t, batch=b, policy="answer_now") for r, k, t, b in new]

    rows, failed = [], 0
    for (r, k, t, b), a in zip(new, first):
        measured = {}
        answer = None
        for progress in c.tune(r, k, t, batch=b, budget_seconds=budget, exhaustive=True):
            if progress.HasField("answer"):
                answer = progress.answer
            elif progress.candidate.measurement.valid:
                # The last valid measurement of each candidate (the final pass's, when it has one).
                measured[progress.candidate.variant.name] = progress.candidate.measurement.gbps
        row = {"problem": f"{r}x{k} {t}" + (f" batch {b}" if b > 1 else ""),
               "source": transposed.pb.Source.Name(a.source), "answer": a.variant.name,
               "nearest": (f"{a.nearest_problem.rows}x{a.nearest_problem.cols} "
                           f"{a.nearest_problem.dtype}" if a.HasField("nearest_problem") else ""),
               "winner": answer.variant.name if answer else "",
               "answer_gbps": measured.get(a.variant.name),
               "winner_gbps": max(measured.values()) if measured else None}
        if row["answer_gbps"] is None or not row["winner_gbps"]:
            failed += 1
            row["ratio"] = None
        else:
            row["ratio"] = row["answer_gbps"] / row["winner_gbps"]
        rows.append(row)
        ratio = "not measured" if row["ratio"] is None else f"{row['ratio']:.3f}"
        of = f" of {row['nearest']}" if row["nearest"] else ""
        print(f"{row['problem']:>28}  ratio {ratio}  answer {row['answer']} ({row['source']}{of})"
              f"  winner {row['winner']}", flush=True)

    ratios = sorted(r["ratio"] for r in rows if r["ratio"] is not None)
    summary = {"seed": seed, "n": len(ratios), "not_measured": failed,
               "median": statistics.median(ratios) if ratios else None,
               "p10": ratios[math.floor(0.1 * (len(ratios) - 1))] if ratios else None,
               "worst": ratios[0] if ratios else None,
               "at_least_0_9": sum(1 for x in ratios if x >= 0.9),
               "device": c.devices()[0].name, "seconds": round(time.monotonic() - start, 1),
               "rows": rows}
    if ratios:
        print(f"first answer / tuned winner over {len(ratios)} problems (seed {seed}): median "
              f"{summary['median']:.3f}, p10 {summary['p10']:.3f}, worst {summary['worst']:.3f}, "
              f"{summary['at_least_0_9']} of {len(ratios)} >= 0.9; {summary['seconds']} s")
    if os.environ.get("FIRST_ANSWER_OUT"):
        with open(os.environ["FIRST_ANSWER_OUT"], "w") as f:
            json.dump(summary, f, indent=1)
    return 1 if failed or not ratios else 0


if __name__ == "__main__":
    sys.exit(main())
