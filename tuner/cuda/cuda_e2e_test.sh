#!/usr/bin/env bash
# End-to-end test of the CUDA backend through the real daemon and client (label gpu).
#   cuda_e2e_test.sh BIN_DIR [OUT_DIR]
# BIN_DIR holds transposed, transposed-worker-faults, transposectl and with_daemon (a build's bin/
# or a bundle's bin/; set LD_LIBRARY_PATH for a bundle). The shared test helper with_daemon
# (testing/) starts `transposed --backend cuda` on a free port with a fresh database, the daemon's
# default tune budget (20 s) and the test-only worker whose engine also offers the faulting
# candidate (--worker transposed-worker-faults), and runs this script again against it (with
# E2E_UNDER_DAEMON set): for a handful of problems, `transposectl --json get` must tune (source
# tuned, a real variant, a sane share of the copy ceiling, the tune time reported), and a second
# get must be a cache hit with the same answer; the daemon must still serve at the end and exit 0
# on SIGTERM. Its log (copied by with_daemon once it stopped) must show the faulting candidate
# killed a worker that was restarted. A value-exact request must be tuned apart and may answer
# cublas.geam; a bit-exact one never (value_exact.log). Writes daemon.log and e2e.csv to OUT_DIR.
# Exit 0 only if every check passed. E2E_PROBLEMS=FILE replaces the list of problems (one per line:
# a label, then get's problem flags; an empty file leaves the value-exact checks only).
set -uo pipefail
bin=${1:?usage: cuda_e2e_test.sh BIN_DIR [OUT_DIR]}
out=${2:-$(mktemp -d)}
mkdir -p "$out"
out=$(cd "$out" && pwd)
if [ -z "${E2E_UNDER_DAEMON:-}" ]; then
  E2E_UNDER_DAEMON=1 "$bin/with_daemon" --daemon "$bin/transposed" --backend cuda \
    --tune-budget 20 --daemon-arg --worker --daemon-arg "$bin/transposed-worker-faults" \
    --copy-log "$out/daemon.log" -- bash "$0" "$bin" "$out"
  status=$?
  if ! grep -q "worker died.*test.fault.illegal_address; restarted" "$out/daemon.log"; then
    echo "FAIL: daemon log shows the faulting candidate killed a worker"
    status=1
  fi
  [ $status = 0 ] && echo "cuda_e2e_test: PASS" || echo "cuda_e2e_test: FAIL"
  exit $status
fi

# Under with_daemon: TRANSPOSED_SERVER is the daemon's address.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
check() {  # check CONDITION_TEXT COMMAND...
  local what=$1; shift
  if ! "$@"; then echo "FAIL: $what"; fail=1; fi
}
field() {  # field FILE EXPR -> EXPR of the transposed.v1.Answer `a` in FILE (its JSON mapping)
  python3 -c 'import json, sys; a = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"
}

ctl() { "$bin/transposectl" --server "$TRANSPOSED_SERVER" --timeout 300 --json "$@"; }

echo "problem,variant,gbps,ceiling_gbps,ratio,tune_seconds,first_get_wall_s,second_source" \
  > "$out/e2e.csv"
while read -r label args; do
  t0=$(date +%s.%N)
  if ! ctl get $args > "$tmp/first.json" 2> "$tmp/err"; then
    echo "FAIL: $label: first get: $(cat "$tmp/err")"; fail=1; continue
  fi
  t1=$(date +%s.%N)
  ctl get $args > "$tmp/second.json" 2> "$tmp/err" || { echo "FAIL: $label: second get"; fail=1; }
  v=$(field "$tmp/first.json" 'a["variant"]["name"]'); src=$(field "$tmp/first.json" 'a["source"]')
  ratio=$(field "$tmp/first.json" 'a["ratio"]'); ts=$(field "$tmp/first.json" 'a["tune_seconds"]')
  gbps=$(field "$tmp/first.json" 'a["gbps"]'); cg=$(field "$tmp/first.json" 'a["ceiling_gbps"]')
  backend=$(field "$tmp/first.json" 'a["variant"]["backend"]')
  v2=$(field "$tmp/second.json" 'a["variant"]["name"]'); src2=$(field "$tmp/second.json" 'a["source"]')
  wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.3f", b-a}')
  check "$label: first source '$src' is tuned" [ "$src" = SOURCE_TUNED ]
  check "$label: backend '$backend' is cuda" [ "$backend" = cuda ]
  check "$label: variant '$v' is a real kernel" [ -n "$v" -a "$v" != test.fault.illegal_address ]
  check "$label: ratio $ratio in (0.2, 1.2)" awk -v r="$ratio" 'BEGIN{exit !(r > 0.2 && r < 1.2)}'
  check "$label: tune_seconds $ts reported" awk -v t="$ts" 'BEGIN{exit !(t > 0)}'
  check "$label: second source '$src2' is cache" [ "$src2" = SOURCE_CACHE ]
  check "$label: second variant '$v2' = '$v'" [ "$v2" = "$v" ]
  echo "$label,$v,$gbps,$cg,$ratio,$ts,$wall,$src2" | tee -a "$out/e2e.csv"
done < <(if [ -n "${E2E_PROBLEMS:-}" ]; then cat "$E2E_PROBLEMS"; else cat <<'PROBLEMS'
8192x8192_f32 --rows 8192 --cols 8192 --dtype f32
4097x3001_f16 --rows 4097 --cols 3001 --dtype f16
1048576x8_i8 --rows 1048576 --cols 8 --dtype i8
4096x4096_f64 --rows 4096 --cols 4096 --dtype f64
256x512x384_f16 --batch 256 --rows 512 --cols 384 --dtype f16
PROBLEMS
fi)

# Value-exact answers (docs/user/api.md "Value-exact answers") on an odd f32 problem: the bit-exact answer is
# never cublas.geam and has no cublas.geam candidate; the value-exact request is tuned apart
# (source tuned, exactness EXACTNESS_VALUE), its answer a candidate that passed its check, and
# where libcublas loads (device attribute cublas) cublas.geam is among its checked candidates.
# transposectl's --json is the API's messages in protobuf's JSON mapping (docs/user/cli.md, JSON).
vp="--rows 4097 --cols 3001 --dtype f32"
if ctl get $vp > "$tmp/bit.json" 2> "$tmp/err" && ctl get $vp --value-exact > "$tmp/value.json" \
    2>> "$tmp/err" && ctl list --candidates --rows 4097 --cols 3001 --dtype f32 > "$tmp/list.json" \
    2>> "$tmp/err" && ctl devices > "$tmp/devices.json" 2>> "$tmp/err"; then
  python3 - "$tmp/bit.json" "$tmp/value.json" "$tmp/list.json" "$tmp/devices.json" \
      > "$out/value_exact.log" 2>&1 <<'PY'
import json, sys
bit, value, listed, devices = (json.load(open(f)) for f in sys.argv[1:5])
bad = []
def need(ok, what):
    print(("ok:   " if ok else "FAIL: ") + what)
    ok or bad.append(what)
has_cublas = "cublas" in devices["devices"][0]["attributes"]
print("cublas:", devices["devices"][0]["attributes"].get("cublas", "(not loaded)"))
need(bit["problem"]["exactness"] == "EXACTNESS_BIT", "bit-exact answer says EXACTNESS_BIT")
need(bit["variant"]["name"] != "cublas.geam",
     "bit-exact answer %s is not cublas.geam" % bit["variant"]["name"])
need(value["problem"]["exactness"] == "EXACTNESS_VALUE", "value-exact answer says EXACTNESS_VALUE")
need(value["source"] == "SOURCE_TUNED", "value-exact request tuned apart (source %s)" % value["source"])
# An Entry is {"answer": Answer, "candidates": [CandidateResult]}: flattened here.
def flat(c):
    return {"variant": c["variant"]["name"], "phase": c["phase"],
            "valid": c["measurement"]["valid"], "gbps": c["measurement"]["gbps"]}
entries = {e["answer"]["problem"]["exactness"]:
           {"variant": e["answer"]["variant"]["name"], "gbps": e["answer"]["gbps"],
            "candidates": [flat(c) for c in e.get("candidates", [])]}
           for e in listed["entries"]}
need(sorted(entries) == ["EXACTNESS_BIT", "EXACTNESS_VALUE"], "two entries, one per exactness")
for name, e in sorted(entries.items()):
    cands = e.get("candidates", [])
    geam = [c for c in cands if c["variant"] == "cublas.geam"]
    checked = [c for c in cands if c["variant"] == e["variant"] and c["phase"] != "check" and c["valid"]]
    need(bool(checked), "%s winner %s is a candidate that passed its check" % (name, e["variant"]))
    if name == "EXACTNESS_BIT":
        need(not geam, "bit-exact tune has no cublas.geam candidate")
    elif has_cublas:
        need(any(c["phase"] != "check" and c["valid"] for c in geam),
             "value-exact tune checked and measured cublas.geam: %s" %
             ["%s %s %.1f GB/s" % (c["phase"], c["valid"], c["gbps"]) for c in geam])
    print("%s: winner %s %.1f GB/s, %d candidates" % (name, e["variant"], e["gbps"], len(cands)))
sys.exit(1 if bad else 0)
PY
  rc=$?
  cat "$out/value_exact.log"
  check "value-exact checks" [ $rc = 0 ]
else
  echo "FAIL: value-exact requests: $(cat "$tmp/err")"; fail=1
fi

check "daemon still serving" "$bin/transposectl" --server "$TRANSPOSED_SERVER" devices
exit $fail
