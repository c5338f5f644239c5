#!/usr/bin/env bash
# `advisor validate --device paced`, kept short: 4 configurations of the tiny
# model on 4 ranks under plain mpirun, one repeat of 3 steps, priced with the
# bundled cpu-8x2core profile (which has no poll_us: a warning). Checks the
# report's device and pace, the profile the predictions used (compute from the
# pace, links as measured), the launch lines, and the paced device's time per
# run with the communication part's MAPE. The engine's record gains per-step
# device_s with its paced backend: where a record has it, the report must carry
# it (> 0) and score comm_mape; where none does, its absence is accepted. Then
# the refusals: a profile measured with another Δ, pace flags without --device
# paced, a bad pace, an unknown device, and resuming a report of another device.
# Usage: validate_paced_test.sh path/to/advisor path/to/engine
set -u
advisor=$1
engine=$2
here=$(cd "$(dirname "$0")" && pwd)
model=$here/gpt-val.json
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
launcher="mpirun --oversubscribe -np 4"
job=(--model "$model" --ranks 4 --batch 8 --steps 3 --engine "$engine" --launcher "$launcher" --machine cpu-8x2core)

source "$(dirname "$0")/../expect.sh"

expect 0 'Device: paced, 2 GFLOP/s, 0.5 GB/s, MPI waits poll every 50 us' -- \
  "$advisor" validate "${job[@]}" --device paced --max-configs 4 --repeats 1 --out "$tmp/r.json"
[[ $(grep -c 'warning: bundled profile cpu-8x2core does not say how its links were waited for (no poll_us)' "$tmp/expect.out") -eq 1 ]] \
  && echo "ok: one warning for a profile without poll_us" || { echo "FAIL: no (or repeated) poll_us warning"; cat "$tmp/expect.out"; failures=$((failures + 1)); }
check "paced report: device and pace, the paced profile, launch lines, device_s and comm_mape where the engine records them" '
import json, math, sys
r = json.load(open(sys.argv[1]))
d = r["device"]
assert d["name"] == "paced", d
assert d["pace"] == {"gemm_gflops": 2, "gbps": 0.5, "poll_us": 50, "host_gbps": 0.1}, d
mp = r["machine_profile"]
assert mp["compute"]["kind"] == "paced" and mp["compute"]["peak_tflops"]["fp32"] == 0.002, mp["compute"]
assert mp["memory"]["hbm_GBps"] == 0.5 and mp["overlap"]["efficiency"] == 1.0 and mp["paced_device"] == d["pace"]
assert mp["name"] == "cpu-8x2core" and mp["intra_node"]["kind"] == "measured"  # links as measured
assert len(r["runs"]) == 4 and all(run["status"] == "ok" for run in r["runs"]), [x.get("error") for x in r["runs"]]
recorded = 0
for run in r["runs"]:
    for rep in run["repeats"]:
        assert " --device paced --pace-gflops 2 --pace-gbps 0.5 --poll-us 50" in rep["command"], rep["command"]
        steps = json.load(open(rep["record"]))["steps"]
        has = [("device_s" in s) for s in steps[1:]]
        if all(has):  # the engine paces: the report must carry it
            recorded += 1
            want = sum(s["device_s"] for s in steps[1:]) / len(steps[1:])
            assert isinstance(rep.get("device_s"), (int, float)) and rep["device_s"] > 0, rep
            assert abs(rep["device_s"] - want) <= 1e-12 * want, (rep["device_s"], want)
            assert rep["device_s"] < rep["time_s"] * 1.0001, rep  # device time inside the step
        else:
            assert "device_s" not in rep, rep
    m = run["measured"]
    if "device_s" in m:
        assert isinstance(m["device_s"], (int, float)) and m["device_s"] > 0, m
s, pooled = r["summary"], r["out_of_sample"]["pooled"]
if recorded == 4:
    assert all("device_s" in run["measured"] for run in r["runs"])
    assert isinstance(s["comm_mape"], (int, float)) and s["comm_mape"] >= 0, s
    lo, hi = s["comm_share_range"]
    assert 0 <= lo <= hi < 1, s["comm_share_range"]
    for part in [pooled["raw"], pooled["fitted"]] + [h[k] for h in r["out_of_sample"]["halves"] for k in ("raw", "fitted")]:
        assert "comm_mape" in part, part
    print("strict: every record has device_s; comm_mape %.3f, communication share %.2f to %.2f" % (s["comm_mape"], lo, hi))
else:
    assert recorded == 0, "some records have device_s, some do not"
    assert "comm_mape" not in s and "comm_share_range" not in s and "comm_mape" not in pooled["raw"], s
    print("lenient: no record has device_s yet (the engine computes as the cpu device)")
' "$tmp/r.json"
if grep -q '"comm_mape"' "$tmp/r.json"; then
  grep -q '^Communication part (time per step - device time): MAPE' "$tmp/expect.out" && echo "ok: comm MAPE in the table" ||
    { echo "FAIL: comm MAPE not printed"; failures=$((failures + 1)); }
fi

# The strict path: the paced engine writes per-step device_s and its device
# into each record. The report must carry device_s, comm_mape as (measured -
# device) against (predicted - compute), and the range of the communication
# share. (The launcher below, which rewrites a record's device, is for the
# wrong-device check further down.)
cat >"$tmp/as-paced" <<'SH'
#!/usr/bin/env bash
rec="" prev=""
for a in "$@"; do [[ $prev == --record ]] && rec=$a; prev=$a; done
"$@" || exit $?
python3 - "$rec" "${FAKE_DEVICE:-paced}" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
if "device_s" not in r["steps"][0]:
    for s in r["steps"]:
        s["device_s"] = 0.5 * s["time_s"]
r["device"] = {"name": sys.argv[2]}
json.dump(r, open(sys.argv[1], "w"))
PY
SH
chmod +x "$tmp/as-paced"
strict=(--model "$model" --ranks 4 --batch 8 --steps 3 --engine "$engine" --machine cpu-8x2core --device paced)
expect 0 'Communication part \(time per step - device time\): MAPE [0-9.]+%; its share of a step [0-9.]+% to [0-9.]+%' -- \
  "$advisor" validate "${strict[@]}" --launcher "$launcher" --max-configs 4 --repeats 2 --out "$tmp/s.json"
check "device_s in every run: its mean over the steps, the median over repeats, comm_mape and the share" '
import json, statistics, sys
r = json.load(open(sys.argv[1]))
assert len(r["runs"]) == 4
pt, pc, mt, md = [], [], [], []
for run in r["runs"]:
    assert run["status"] == "ok", run
    for rep in run["repeats"]:
        steps = json.load(open(rep["record"]))["steps"][1:]
        want = sum(s["device_s"] for s in steps) / len(steps)
        assert abs(rep["device_s"] - want) <= 1e-12 * want, (rep["device_s"], want)
    m = run["measured"]
    assert abs(m["device_s"] - statistics.median(x["device_s"] for x in run["repeats"])) <= 1e-12 * m["device_s"]
    pt.append(run["predicted"]["time_s"]); pc.append(run["predicted"]["compute_s"])
    mt.append(m["time_s"]); md.append(m["device_s"])
want = sum(abs((a - b) - (c - d)) / (c - d) for a, b, c, d in zip(pt, pc, mt, md)) / len(pt)
s = r["summary"]
assert abs(s["comm_mape"] - want) <= 1e-9 * want, (s["comm_mape"], want)
assert abs(s["comm_mape"] - r["out_of_sample"]["pooled"]["raw"]["comm_mape"]) <= 1e-12
lo, hi = s["comm_share_range"]
shares = [1 - d / c for c, d in zip(mt, md)]
assert abs(lo - min(shares)) <= 1e-12 and abs(hi - max(shares)) <= 1e-12, (lo, hi, shares)
for h in r["out_of_sample"]["halves"]:
    assert h["raw"]["comm_mape"] >= 0 and h["fitted"]["comm_mape"] >= 0, h
assert r["out_of_sample"]["pooled"]["fitted"]["comm_mape"] >= 0
' "$tmp/s.json"
# A record that says it ran on another device than launched is a failed run.
FAKE_DEVICE=cpu expect 1 "the record's device is 'cpu', the run was launched with --device paced" -- \
  "$advisor" validate "${strict[@]}" --launcher "$tmp/as-paced $launcher" --repeats 1 --max-configs 1 \
  --out "$tmp/wrong.json"

# The refit reads a paced report (its profile is the paced one) and gives a profile the advisor loads.
expect 0 'refitted to 4 measured runs' -- "$advisor" calibrate --from-runs "$tmp/r.json" -o "$tmp/fitted.json"
check "the refitted profile keeps the pace" '
import json, sys
p = json.load(open(sys.argv[1]))
assert p["paced_device"] == {"gemm_gflops": 2, "gbps": 0.5, "poll_us": 50, "host_gbps": 0.1} and p["fitted"]["kind"] == "fitted"
' "$tmp/fitted.json"

# Offloaded: every run with --offload and, as the model prices it, --clip 0;
# the copies cross the paced host link, each way at the pace, and the
# predictions price the same link.
expect 0 ' offload' -- "$advisor" validate "${job[@]}" --device paced --offload --pace-host-gbps 0.05 --max-configs 3 \
  --repeats 1 --out "$tmp/o.json"
check "offloaded validation: launch lines, the paced copies, the profile's host link" '
import json, sys
r = json.load(open(sys.argv[1]))
assert r["device"]["pace"]["host_gbps"] == 0.05 and r["machine_profile"]["host"]["link_GBps"] == 0.05, r["device"]
assert len(r["runs"]) == 3, len(r["runs"])
for run in r["runs"]:
    assert run["status"] == "ok" and run["config"]["offload"], (run.get("error"), run["config"])
    cmd = run["repeats"][0]["command"]
    assert " --offload" in cmd and " --clip 0" in cmd and " --pace-host-gbps 0.05" in cmd, cmd
    off = json.load(open(run["repeats"][0]["record"]))["offload"]
    # Both ways, each bytes / 0.05 GB/s: summed per step.
    want = 2 * off["copy_bytes_each_way"] / 0.05e9
    assert off["enabled"] and abs(off["copy_s_per_step"] - want) <= 1e-9 * want, (off, want)
    assert run["predicted"]["time_s"] > 0 and run["measured"]["time_s"] > want / 2, (run["predicted"], want)
' "$tmp/o.json"

# --- refusals: exit 2, a clear message ----------------------------------------
python3 -c '
import json, sys
p = json.load(open(sys.argv[1])); p["poll_us"] = 20; p["name"] = "polled-20"
json.dump(p, open(sys.argv[2], "w"))
' "$here/../../profiles/cpu-8x2core.json" "$tmp/p20.json"
paced_bad=(--model "$model" --ranks 4 --batch 8 --steps 3 --engine "$engine" --launcher "$launcher" --out "$tmp/b.json")
expect 2 'its links were measured with poll_us 20, but the paced engine waits with --poll-us 50.*or give --poll-us 20' -- \
  "$advisor" validate "${paced_bad[@]}" --machine "$tmp/p20.json" --device paced
expect 2 '--pace-gflops describes the paced device: give --device paced' -- \
  "$advisor" validate "${paced_bad[@]}" --pace-gflops 4
expect 2 '--pace-gbps: expected a number > 0' -- "$advisor" validate "${paced_bad[@]}" --device paced --pace-gbps 0
expect 2 '--pace-host-gbps: expected a number > 0' -- \
  "$advisor" validate "${paced_bad[@]}" --device paced --pace-host-gbps -1
expect 2 "--offload: machine 'frontier' gives no host link" -- \
  "$advisor" validate "${paced_bad[@]}" --machine frontier --offload
expect 2 "--device 'gpu': expected cpu" -- "$advisor" validate "${paced_bad[@]}" --device gpu
[[ -e $tmp/b.json ]] && { echo "FAIL: a refused validation wrote a report"; failures=$((failures + 1)); }
cp "$tmp/r.json" "$tmp/before.json"
expect 2 'was measured on another device' -- "$advisor" validate "${job[@]}" --max-configs 4 --repeats 1 --out "$tmp/r.json" --resume
expect 2 'was measured on another device' -- \
  "$advisor" validate "${job[@]}" --device paced --poll-us 20 --max-configs 4 --repeats 1 --out "$tmp/r.json" --resume
cmp -s "$tmp/r.json" "$tmp/before.json" && echo "ok: the paced report is untouched" || { echo "FAIL: report changed"; failures=$((failures + 1)); }

# Pipelined configurations: with 2 layers every stage count dividing them and
# the ranks is in the set (P = 1 and 2); --pipeline 2 keeps those alone, each
# run launched with --pipeline 2 and priced with its stages.
python3 -c 'import json, sys; m = json.load(open(sys.argv[1])); m.update(name="gpt-val-2l", layers=2); json.dump(m, open(sys.argv[2], "w"))' \
  "$model" "$tmp/val2.json"
pipe_job=(--model "$tmp/val2.json" --ranks 4 --batch 8 --steps 3 --engine "$engine" --launcher "$launcher" --machine cpu-8x2core)
expect 0 'p2 ' -- "$advisor" validate "${pipe_job[@]}" --device paced --pipeline 2 --max-configs 3 --repeats 1 --out "$tmp/p.json"
check "pipelined validation: every run has 2 stages, ran, and was priced" '
import json, sys
r = json.load(open(sys.argv[1]))
assert len(r["runs"]) == 3, len(r["runs"])
for run in r["runs"]:
    assert run["config"]["grid"]["pipe"] == 2 and run["status"] == "ok", run.get("error")
    assert "--pipeline 2" in run["repeats"][0]["command"], run["repeats"][0]["command"]
    assert run["predicted"]["time_s"] > 0 and run["measured"]["time_s"] > 0
' "$tmp/p.json"
# Sequence parallelism (MODEL.md §13): --sequence-parallel keeps it wherever
# G_y > 1 (grids without Y run as they are), each such run launched with the
# flag and priced with it.
expect 0 ' sp' -- "$advisor" validate "${pipe_job[@]}" --device paced --sequence-parallel --max-configs 6 --repeats 1 \
  --out "$tmp/sp.json"
check "sequence-parallel validation: every run with G_y > 1 ran with the flag and was priced with it" '
import json, sys
r = json.load(open(sys.argv[1]))
assert len(r["runs"]) == 6 and any(run["config"]["grid"]["y"] > 1 for run in r["runs"]), [run["key"] for run in r["runs"]]
for run in r["runs"]:
    assert run["status"] == "ok", run.get("error")
    sp = run["config"]["grid"]["y"] > 1
    assert run["config"]["sequence_parallel"] == sp, run["config"]
    assert (" --sequence-parallel" in run["repeats"][0]["command"]) == sp, run["repeats"][0]["command"]
    assert run["predicted"]["time_s"] > 0 and run["measured"]["time_s"] > 0
' "$tmp/sp.json"
# Which configurations the default set holds is the report's sample, run or
# not: a launcher that fails at once (`false`) lists all 40 in a second
# instead of running them (70 s).
all_job=(--model "$tmp/val2.json" --ranks 4 --batch 8 --steps 3 --engine "$engine" --launcher false --machine cpu-8x2core)
expect 1 '40 of 40 runs of the engine failed' -- "$advisor" validate "${all_job[@]}" --device paced --max-configs 40 --repeats 1 --out "$tmp/all.json"
check "by default, the stage counts dividing the layers and ranks: 1 and 2" '
import json, sys
r = json.load(open(sys.argv[1]))
assert len(r["runs"]) == 40 and all(run["status"] == "failed" for run in r["runs"]), len(r["runs"])
assert {run["config"]["grid"]["pipe"] for run in r["runs"]} == {1, 2}, [run["key"] for run in r["runs"]]
' "$tmp/all.json"
expect 2 'pipeline 3: stages must divide the 4 GPUs and hold at least one of the 2 layers each' -- \
  "$advisor" validate "${pipe_job[@]}" --pipeline 3 --out "$tmp/bad.json"

if [[ $failures -ne 0 ]]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all paced validate checks passed"
