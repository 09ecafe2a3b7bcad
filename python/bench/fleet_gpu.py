"""Issue 26 item 3 on real GPUs: the fleet helps. A node whose GPU is idle takes the class-wide lease
for the problems a busy node misses, so the tunes run where they cost no job anything, and the busy
node gets the results.

Run by python/bench/fleet_gpu.sh, which starts a redis-server and two daemons sharing it, one per
GPU: the busy node on GPU 0 ($TRANSPOSED_SERVER; this job streams memory on GPU 0 too) and the
idle node on GPU 1 ($FLEET_IDLE_SERVER). Phases (polite_gpu.py's problems and stream, so the two
stages compare): the job alone (the baseline), then the job asks the busy node for the problems
under ANSWER_NOW, as the Python package does, and goes on streaming until every problem is stored
on the busy node (CACHE_ONLY hits there; at least POLITE_BUSY_S, at most FLEET_LIMIT_S). Reported:
which node measured each problem (Answer.measured_on against each node's device UUID), the time
from the ask until each is stored on the busy node, the job's bandwidth with and without, and,
when $FLEET_POLITE_JSON names the single-node polite stage's result of the same run, its figures
beside ours. Then the health probe's false-positive check (server/device_health.h; issue 38):
with the job stopped, both nodes re-tune HEALTH_PROBLEMS (16 MiB - 1 GiB) HEALTH_ROUNDS times
each (Tune, so each GPU measures its copy ceiling at every size), comparing each GPU's ceiling
with the other's through the shared store; both GPUs are healthy, so neither may be flagged.
Prints one JSON object (and writes it to $FLEET_OUT when set); exit status 1 when a promise fails:
a problem measured on the busy node or not stored within FLEET_LIMIT_S, the job lost 5% or more
of its bandwidth, a GPU flagged slow, or no health verdict at all.
"""
import json
import os
import statistics
import threading
import time

import torch

import transposed
from transposed import pb

from polite_gpu import PROBLEMS, stream

MAX_LOSS_PCT = 5.0
HEALTH_PROBLEMS = [(4096, 4096, "f32"), (8192, 4096, "f32"), (6144, 5120, "f16"),
                   (16384, 8192, "f32"), (4096, 12288, "bf16"), (12288, 2048, "u8")]


def health_check(nodes):
    """Re-tunes HEALTH_PROBLEMS on every node, HEALTH_ROUNDS times; each GPU's health after."""
    rounds = int(os.environ.get("HEALTH_ROUNDS", "3"))
    ratios = {name: [] for name in nodes}
    for _ in range(rounds):
        for name, client in nodes.items():
            for rows, cols, dtype in HEALTH_PROBLEMS:
                for _progress in client.tune(rows, cols, dtype, budget_seconds=2):
                    pass
                h = client.devices()[0].health
                if h.verdicts:
                    ratios[name].append(round(h.ceiling_ratio, 3))
    out = {}
    for name, client in nodes.items():
        h = client.devices()[0].health
        out[name] = {"slow": h.slow, "verdicts": h.verdicts, "reason": h.reason,
                     "ceiling_ratios": ratios[name]}
    return {"rounds": rounds, "problems": [key(p) for p in HEALTH_PROBLEMS], "devices": out}


def key(p):
    return f"{p[0]}x{p[1]}.{p[2]}"


def load_of(client):
    d = client.devices()[0].load
    return {"state": d.state, "utilization_percent": d.utilization_percent,
            "other_processes": d.other_processes, "detail": d.detail}


def polite_figures(path):
    """The single-node polite stage's result (polite_gpu.py's JSON) in this report's terms."""
    if not path or not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        r = json.load(f)
    after = r.get("all_tuned_after_idle_s")
    return {"source": path, "loss_mean_pct": r.get("loss_mean_pct"),
            "tuned_during_job": r.get("tuned_during_job"),
            # From the ask: the job's busy phase, then the tunes once it went idle.
            "all_stored_after_ask_s": (r["asked_to_idle_s"] + after) if after is not None else None,
            "all_stored_after_idle_s": after}


def main():
    busy = transposed.Client(timeout=600)
    idle = transposed.Client(os.environ["FLEET_IDLE_SERVER"], timeout=600)
    busy_dev, idle_dev = busy.devices()[0], idle.devices()[0]
    problems_found = []
    if busy_dev.uuid == idle_dev.uuid:
        problems_found.append(f"both daemons have device {busy_dev.uuid}: not two GPUs")
    if busy_dev.device_class != idle_dev.device_class:
        problems_found.append(f"the GPUs are of two classes ({busy_dev.device_class} and "
                              f"{idle_dev.device_class}): the fleet shares within a class")
    x = torch.empty(512 * 2**20, dtype=torch.float32, device="cuda").uniform_()  # 2 GiB
    y = torch.empty_like(x)
    stream(x, y, 2.0, [])  # warm up
    alone = []
    stream(x, y, float(os.environ.get("POLITE_ALONE_S", "6")), alone)
    # The busy node must see its GPU busy before the job asks (it samples every 2 s when idle).
    seen_busy_by = time.monotonic() + 10
    while load_of(busy)["state"] != "busy" and time.monotonic() < seen_busy_by:
        stream(x, y, 0.5, [])
    at_ask = {"busy_node": load_of(busy), "idle_node": load_of(idle)}

    # The job asks for new problems and goes on streaming; a thread polls the busy node's store.
    asked_at = time.monotonic()
    sources = [busy.get_config(r, k, t, policy="answer_now").source for r, k, t in PROBLEMS]
    stored = {}  # problem -> (seconds after the ask, the busy node's answer)
    loads = []
    stop = threading.Event()

    def watch():
        while not stop.is_set():
            for p in PROBLEMS:
                if p in stored:
                    continue
                try:
                    a = busy.get_config(*p, policy="cache_only")
                    stored[p] = (time.monotonic() - asked_at, a)
                except transposed.Error:
                    pass
            loads.append(load_of(busy)["state"])
            stop.wait(0.25)

    watcher = threading.Thread(target=watch)
    watcher.start()
    with_fleet = []
    min_s = float(os.environ.get("POLITE_BUSY_S", "12"))
    limit_s = float(os.environ.get("FLEET_LIMIT_S", "60"))
    while True:
        stream(x, y, 1.0, with_fleet)
        elapsed = time.monotonic() - asked_at
        if elapsed >= limit_s or (elapsed >= min_s and len(stored) == len(PROBLEMS)):
            break
    stop.set()
    watcher.join()
    phase_s = time.monotonic() - asked_at
    del x, y
    torch.cuda.empty_cache()
    health = health_check({"busy node (GPU 0)": busy, "idle node (GPU 1)": idle})
    for name, h in health["devices"].items():
        if h["slow"]:
            problems_found.append(f"health: {name} flagged slow (both GPUs are healthy): "
                                  f"{h['reason']}")
        if h["verdicts"] == 0:
            problems_found.append(f"health: no verdict on {name}: the probe was not exercised")

    measured_on = {}
    for p in PROBLEMS:
        if p not in stored:
            measured_on[key(p)] = None
            continue
        uuid = stored[p][1].measured_on.uuid
        measured_on[key(p)] = ("idle node" if uuid == idle_dev.uuid else
                               "busy node" if uuid == busy_dev.uuid else uuid)
    not_stored = [key(p) for p in PROBLEMS if p not in stored]
    on_busy = [k for k, v in measured_on.items() if v is not None and v != "idle node"]
    loss = 100 * (1 - statistics.mean(with_fleet) / statistics.mean(alone))
    if not_stored:
        problems_found.append(f"not stored on the busy node within {limit_s:.0f} s: {not_stored}")
    if on_busy:
        problems_found.append(f"measured elsewhere than on the idle node: {on_busy}")
    if loss >= MAX_LOSS_PCT:
        problems_found.append(f"the job lost {loss:.1f}% of its bandwidth (limit {MAX_LOSS_PCT}%)")
    all_stored = max(s for s, _ in stored.values()) if not not_stored else None
    result = {
        "device": busy_dev.name, "busy_uuid": busy_dev.uuid, "idle_uuid": idle_dev.uuid,
        "cuda_driver": busy_dev.attributes.get("driver_version", ""),  # nvidia-smi: run.log
        "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
        "problems": [key(p) for p in PROBLEMS],
        "first_answer_sources": [pb.Source.Name(s) for s in sources],
        "load_at_ask": at_ask,
        "busy_states_seen": sorted(set(loads)),
        "measured_on": measured_on,
        "stored_after_ask_s": {key(p): round(stored[p][0], 2) for p in PROBLEMS if p in stored},
        "tune_seconds": {key(p): round(stored[p][1].tune_seconds, 3)
                         for p in PROBLEMS if p in stored},
        "contention": {key(p): stored[p][1].contention for p in PROBLEMS if p in stored},
        "all_stored_after_ask_s": all_stored,
        "alone_gbps_mean": statistics.mean(alone),
        "with_fleet_gbps_mean": statistics.mean(with_fleet),
        "loss_mean_pct": loss,
        "worst_window_loss_pct": 100 * (1 - min(with_fleet) / statistics.median(alone)),
        "windows": len(with_fleet), "phase_s": phase_s,
        "single_node_polite": polite_figures(os.environ.get("FLEET_POLITE_JSON")),
        "health": health,
        "failures": problems_found,
    }
    text = json.dumps(result, indent=1)
    print(text)
    if os.environ.get("FLEET_OUT"):
        with open(os.environ["FLEET_OUT"], "w", encoding="utf-8") as f:
            f.write(text + "\n")
    for p in problems_found:
        print(f"fleet_gpu: FAILED: {p}")
    return 1 if problems_found else 0


if __name__ == "__main__":
    raise SystemExit(main())
