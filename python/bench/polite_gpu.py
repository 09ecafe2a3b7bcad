"""Issue 26's measurement, repeated: a job streaming GPU memory while the daemon gets new problems
under ANSWER_NOW (each miss queues a background tune on the same GPU).

Run under testing/with_daemon (TRANSPOSED_SERVER set) by python/bench/polite_gpu.sh, which starts
the daemon with the CUDA backend. Phases: the job alone (its bandwidth, the baseline), then the
job while the daemon is asked for PROBLEMS it has not tuned (its bandwidth with the daemon's
background tunes beside it, and the device's busy signal as ListDevices shows it), then the job
stops and the time until every problem is stored (CACHE_ONLY hits) is measured. Prints one JSON
object (and writes it to $POLITE_OUT when set).
"""
import json
import os
import statistics
import threading
import time

import torch

import transposed
from transposed import pb

PROBLEMS = [(8192, 4096, "f32"), (6144, 5120, "f16"), (4096, 12288, "bf16"), (3000, 7000, "f32"),
            (12288, 2048, "u8"), (2048, 10240, "f32")]
WINDOW_S = 0.25


def stream(x, y, seconds, out):
    """Copies x into y for `seconds`; appends each window's GB/s (read + write) to out."""
    end = time.monotonic() + seconds
    nbytes = 2 * x.numel() * x.element_size()
    while time.monotonic() < end:
        torch.cuda.synchronize()
        start = time.monotonic()
        n = 0
        while time.monotonic() - start < WINDOW_S:
            for _ in range(8):
                y.copy_(x)
            n += 8
            torch.cuda.synchronize()
        out.append(n * nbytes / (time.monotonic() - start) / 1e9)


def main():
    c = transposed.Client(timeout=600)
    dev = c.devices()[0]
    x = torch.empty(512 * 2**20, dtype=torch.float32, device="cuda").uniform_()  # 2 GiB
    y = torch.empty_like(x)
    stream(x, y, 2.0, [])  # warm up
    alone = []
    stream(x, y, float(os.environ.get("POLITE_ALONE_S", "6")), alone)

    # The job asks for new problems (as a model's first steps do) and goes on streaming.
    busy = []
    loads = []
    asked_at = time.monotonic()
    sources = [c.get_config(r, k, t, policy="answer_now").source for r, k, t in PROBLEMS]

    def watch(stop):
        while not stop.is_set():
            load = c.devices()[0].load
            loads.append({"state": load.state, "utilization_percent": load.utilization_percent,
                          "other_processes": load.other_processes,
                          "background_waiting": load.background_waiting,
                          "detail": load.detail})
            stop.wait(0.5)

    stop = threading.Event()
    watcher = threading.Thread(target=watch, args=(stop,))
    watcher.start()
    stream(x, y, float(os.environ.get("POLITE_BUSY_S", "12")), busy)
    stop.set()
    watcher.join()
    tuned_during_job = 0
    for r, k, t in PROBLEMS:
        try:
            c.get_config(r, k, t, policy="cache_only")
            tuned_during_job += 1
        except transposed.Error:
            pass

    # The job goes idle (frees the GPU): how long until every problem is tuned and stored.
    del x, y
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    idle_at = time.monotonic()
    pending = list(PROBLEMS)
    deadline = idle_at + float(os.environ.get("POLITE_IDLE_LIMIT_S", "150"))
    answers = {}
    while pending and time.monotonic() < deadline:
        for p in list(pending):
            try:
                a = c.get_config(*p, policy="cache_only")
                answers[p] = a
                pending.remove(p)
            except transposed.Error:
                pass
        time.sleep(0.1)
    tuned_after_s = time.monotonic() - idle_at
    base = statistics.median(alone)
    result = {
        "device": dev.name, "uuid": dev.uuid,
        "driver": dev.attributes.get("driver_version", ""),
        "alone_gbps_median": base,
        "with_tunes_gbps_median": statistics.median(busy),
        "with_tunes_gbps_mean": statistics.mean(busy),
        "alone_gbps_mean": statistics.mean(alone),
        "loss_mean_pct": 100 * (1 - statistics.mean(busy) / statistics.mean(alone)),
        "worst_window_gbps": min(busy),
        "worst_window_loss_pct": 100 * (1 - min(busy) / base),
        "windows": len(busy),
        "first_answer_sources": [pb.Source.Name(s) for s in sources],
        "tuned_during_job": tuned_during_job,
        "asked_to_idle_s": idle_at - asked_at,
        "all_tuned_after_idle_s": tuned_after_s if not pending else None,
        "not_tuned": [list(p) for p in pending],
        "contention": {f"{r}x{k}.{t}": answers[(r, k, t)].contention for r, k, t in answers},
        "load_samples": loads[:4] + loads[-2:],
        "load_states_seen": sorted({l["state"] for l in loads}),
    }
    text = json.dumps(result, indent=1)
    print(text)
    if os.environ.get("POLITE_OUT"):
        with open(os.environ["POLITE_OUT"], "w", encoding="utf-8") as f:
            f.write(text + "\n")
    return 0 if not pending else 1


if __name__ == "__main__":
    raise SystemExit(main())
