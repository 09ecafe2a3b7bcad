"""Issue 33 on real GPUs: a foreground miss on a busy GPU. A torch job streams memory on GPU 0
while `transposectl get` (the default policy: the caller waits for the tune) asks GPU 0's daemon
for three problems it has never tuned. GPU 1's daemon, of the same class and sharing the same
Redis, is idle: the misses should be measured there (the busy node asks the class's idle nodes
first), not on the job's GPU, and the job should not notice.

Run by python/bench/foreground_gpu.sh, which starts a redis-server and the two daemons:
$TRANSPOSED_SERVER (GPU 0, the busy node; this job streams on GPU 0 too) and $FLEET_IDLE_SERVER
(GPU 1). Phases: the job alone (its bandwidth in 0.5 s windows: the baseline), then the job while
three `transposectl get` calls run at once (each as a subprocess, $TRANSPOSECTL), streaming until
they all answered (at least FOREGROUND_MIN_S). Reported: the job's loss over the asking phase and in
every 0.5 s window, each answer's wall time and `source`, and where each problem was measured
(Answer.measured_on, read back with CACHE_ONLY from the busy node, against each node's device
UUID). Prints one JSON object (and writes it to $FOREGROUND_OUT when set); exit status 1 when a
promise of issue 33 fails: the job lost more than 2% over the phase or more than 10% in a window,
a `get` failed, or an answer does not say where it was measured.
"""
import json
import os
import shlex
import statistics
import subprocess
import time

import torch

import transposed

# New to both daemons (not among polite_gpu.py's or fleet_gpu.py's problems).
PROBLEMS = [(7168, 3072, "f32"), (5120, 6144, "f16"), (10240, 1536, "bf16")]
WINDOW_S = 0.5
MAX_LOSS_PCT = 2.0
MAX_WINDOW_LOSS_PCT = 10.0


def key(p):
    return f"{p[0]}x{p[1]}.{p[2]}"


def stream_windows(x, y, seconds, out, until=None):
    """Copies x into y in WINDOW_S windows for `seconds` (or until `until()` once that long);
    appends each window's GB/s (read + write) to out."""
    start_all = time.monotonic()
    nbytes = 2 * x.numel() * x.element_size()
    while True:
        elapsed = time.monotonic() - start_all
        if elapsed >= seconds and (until is None or until()):
            return
        if until is not None and elapsed >= float(os.environ.get("FOREGROUND_LIMIT_S", "120")):
            return
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
    busy = transposed.Client(timeout=600)
    idle = transposed.Client(os.environ["FLEET_IDLE_SERVER"], timeout=600)
    busy_dev, idle_dev = busy.devices()[0], idle.devices()[0]
    failures = []
    if busy_dev.uuid == idle_dev.uuid:
        failures.append(f"both daemons have device {busy_dev.uuid}: not two GPUs")
    if busy_dev.device_class != idle_dev.device_class:
        failures.append("the two GPUs are of two classes: the fleet shares within a class")
    x = torch.empty(512 * 2**20, dtype=torch.float32, device="cuda").uniform_()  # 2 GiB
    y = torch.empty_like(x)
    stream_windows(x, y, 2.0, [])  # warm up
    alone = []
    stream_windows(x, y, float(os.environ.get("FOREGROUND_ALONE_S", "6")), alone)
    # The busy node must see its GPU busy before the asks (it samples every 2 s when idle).
    seen_by = time.monotonic() + 10
    while busy.devices()[0].load.state != "busy" and time.monotonic() < seen_by:
        stream_windows(x, y, 0.5, [])
    state_at_ask = busy.devices()[0].load.state

    ctl = shlex.split(os.environ.get("TRANSPOSECTL", "transposectl"))  # the bundle's "run transposectl"
    server = os.environ["TRANSPOSED_SERVER"]
    asked_at = time.monotonic()
    procs = {}
    for p in PROBLEMS:
        cmd = ctl + ["--server", server, "--json", "--timeout", "600", "get", "--rows", str(p[0]),
               "--cols", str(p[1]), "--dtype", p[2]]
        procs[p] = (subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True), time.monotonic())
    answered = {}

    def all_answered():
        for p, (proc, started) in procs.items():
            if p not in answered and proc.poll() is not None:
                out, err = proc.communicate()
                answered[p] = {"rc": proc.returncode, "seconds": round(time.monotonic() - started, 2),
                               "stdout": out, "stderr": err.strip()[-400:]}
        return len(answered) == len(procs)

    with_gets = []
    stream_windows(x, y, float(os.environ.get("FOREGROUND_MIN_S", "8")), with_gets, all_answered)
    all_answered()
    phase_s = time.monotonic() - asked_at
    for p, (proc, _) in procs.items():
        if p not in answered:
            proc.kill()
            failures.append(f"transposectl get {key(p)}: no answer within the limit")

    answers = {}
    for p in PROBLEMS:
        a = answered.get(p)
        if a is None:
            continue
        entry = {"rc": a["rc"], "seconds": a["seconds"]}
        if a["rc"] != 0:
            entry["stderr"] = a["stderr"]
            failures.append(f"transposectl get {key(p)} failed: {a['stderr']}")
        else:
            try:
                j = json.loads(a["stdout"])
                entry.update({"source": j.get("source"), "gbps": j.get("gbps"),
                              "device": j.get("device"), "tune_seconds": j.get("tune_seconds")})
            except ValueError:
                entry["stdout"] = a["stdout"][-400:]
        try:
            cached = busy.get_config(*p, policy="cache_only")
            uuid = cached.measured_on.uuid
            entry["measured_on"] = ("idle node (GPU 1)" if uuid == idle_dev.uuid else
                                    "busy node (GPU 0)" if uuid == busy_dev.uuid else uuid or None)
            entry["contention"] = cached.contention
        except transposed.Error as e:
            entry["measured_on"] = None
            entry["lookup_error"] = str(e)
        if not entry.get("measured_on"):
            failures.append(f"{key(p)}: the answer does not say where it was measured")
        answers[key(p)] = entry

    base = statistics.mean(alone)
    loss = 100 * (1 - statistics.mean(with_gets) / base) if with_gets else None
    window_loss = [round(100 * (1 - w / base), 2) for w in with_gets]
    worst = max(window_loss) if window_loss else None
    if loss is not None and loss > MAX_LOSS_PCT:
        failures.append(f"the job lost {loss:.2f}% over the run (limit {MAX_LOSS_PCT}%)")
    if worst is not None and worst > MAX_WINDOW_LOSS_PCT:
        failures.append(f"the job lost {worst:.1f}% in a 0.5 s window (limit "
                        f"{MAX_WINDOW_LOSS_PCT}%)")
    result = {
        "device": busy_dev.name, "busy_uuid": busy_dev.uuid, "idle_uuid": idle_dev.uuid,
        "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
        "busy_state_at_ask": state_at_ask,
        "answers": answers,
        "alone_gbps_mean": base,
        "with_gets_gbps_mean": statistics.mean(with_gets) if with_gets else None,
        "loss_pct": loss, "worst_window_loss_pct": worst,
        "window_loss_pct": window_loss, "window_s": WINDOW_S, "phase_s": round(phase_s, 2),
        "failures": failures,
    }
    text = json.dumps(result, indent=1)
    print(text)
    if os.environ.get("FOREGROUND_OUT"):
        with open(os.environ["FOREGROUND_OUT"], "w", encoding="utf-8") as f:
            f.write(text + "\n")
    for f in failures:
        print(f"foreground_gpu: FAILED: {f}")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
