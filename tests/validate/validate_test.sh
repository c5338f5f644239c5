#!/usr/bin/env bash
# `advisor validate` end to end: the engine run on a sample of one job's
# configurations under mpirun, the report's fields, --resume running only
# what is new (more configurations, more repeats), the medians and spread of
# repeats, a report from before repeats, the placement check, the SVG,
# `calibrate --from-runs`, a run that fails, and bad input exiting 2 with a
# clear message and no file left behind.
# Usage: validate_test.sh path/to/advisor path/to/engine
set -u
advisor=$1
engine=$2
here=$(cd "$(dirname "$0")" && pwd)
model=$here/gpt-val.json
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
launcher="mpirun --oversubscribe -np 4"
job=(--model "$model" --ranks 4 --batch 8 --steps 3 --engine "$engine" --launcher "$launcher")

source "$(dirname "$0")/../expect.sh"
nothing_at() {
  if [[ -e $1 || -e $1.runs ]] || compgen -G "$tmp/*.tmp.*" >/dev/null; then
    echo "FAIL: $1, its .runs or a temporary left behind"
    failures=$((failures + 1))
  else
    echo "ok: nothing left at $1"
  fi
}

# --- a sample of 4 run once, then resumed into 2 repeats and 1 more ----------
expect 0 'In sample' -- "$advisor" validate "${job[@]}" --max-configs 4 --repeats 1 --out "$tmp/r.json" --plot "$tmp/r.svg"
grep -q 'stated sample of 4' "$tmp/expect.out" && echo "ok: the sample is stated" || { echo "FAIL: sample not stated"; failures=$((failures + 1)); }
[[ $(grep -c '^\[pass 1/1, [0-9]/4\] grid' "$tmp/expect.out") -eq 4 ]] && echo "ok: 4 progress lines" || { echo "FAIL: progress lines"; failures=$((failures + 1)); }
cp "$tmp/r.json" "$tmp/first.json"
check "report: job, sample, 4 successful runs of one repeat, predicted and measured per axis, scores, placement" '
import json, math, sys
r = json.load(open(sys.argv[1]))
assert r["job"]["ranks"] == 4 and r["job"]["batch_sequences"] == 8 and r["job"]["steps"] == 3 and r["job"]["dtype"] == "fp32"
assert r["job"]["model"]["name"] == "gpt-val" and r["repeats"] == 1
assert r["sampled"] is True and r["sample"]["planned"] == 4 and r["sample"]["feasible"] > 4
assert "mpirun" in r["launcher"] and r["engine"].endswith("engine")
assert len(r["runs"]) == 4
grids = set()
for run in r["runs"]:
    assert run["status"] == "ok", run
    c = run["config"]
    grids.add((c["grid"]["x"], c["grid"]["y"], c["grid"]["z"], c["grid"]["data"]))
    assert c["dtype"] == "fp32"
    p, m = run["predicted"], run["measured"]
    assert p["time_s"] > 0 and set(p["exposed_comm_s"]) == {"x", "y", "z", "pipe", "data"}
    assert len(run["repeats"]) == 1
    one = run["repeats"][0]
    assert one["repeat"] == 1 and one["status"] == "ok" and one["log"].endswith("_r1.log") and one["record"].endswith("_r1.json")
    assert one["wall_s"] > 0
    assert one["time_s"] > 0 and set(one["comm_s"]) == {"x", "y", "z", "pipe", "data"}
    # the steps stay in the engine record, not copied into the report
    assert "steps" not in one and one["steps_discarded"] == 1
    steps = json.load(open(one["record"]))["steps"]
    assert len(steps) == 3
    times = sorted(s["time_s"] for s in steps[1:])
    assert abs(one["time_s"] - (times[0] + times[1]) / 2) <= 1e-12 * one["time_s"]  # median of steps 2..3
    assert m["time_s"] == one["time_s"] and m["compute_s"] == one["compute_s"] and m["comm_s"] == one["comm_s"]
    assert m["repeats_ok"] == 1 and m["spread"] == {"min_s": one["time_s"], "max_s": one["time_s"], "relative": 0}
# round-robin over shapes, the top pick moved in first: 3 or 4 shapes
assert len(grids) >= 3, grids
s = r["summary"]
assert s["n"] == 4 and s["mape"] >= 0 and -1 <= s["spearman"] <= 1 and -1 <= s["kendall"] <= 1 and s["regret"] >= 0
assert s["median_spread"] is None  # no configuration ran twice
# Ranges: each predicted range holds its prediction; the coverage counts the runs measured inside.
inside = 0
for run in r["runs"]:
    lo, hi = run["predicted"]["range_s"]
    assert lo < run["predicted"]["time_s"] < hi, run["predicted"]
    inside += lo <= run["measured"]["time_s"] <= hi
rc = s["range_coverage"]
assert rc["n"] == 4 and rc["inside"] == inside and abs(rc["share"] - inside / 4) < 1e-12 and rc["basis"].startswith("compute"), rc
# Out of sample (each half under the other half fit): every run counted once, the share from its count.
oos = r["out_of_sample"]["pooled"]["fitted"]["range_coverage"]
assert oos["n"] == 4 and isinstance(oos["inside"], int) and abs(oos["share"] - oos["inside"] / 4) < 1e-12, oos
keys = [run["key"] for run in r["runs"]]
assert s["top_pick"] in keys and s["measured_best"] in keys
pl = r["placement"]
assert pl["top_pick"] == keys[0]  # predicted fastest of all, planned first
assert pl["heavy_axis"] in ("x", "y", "z", "data") and pl["heavy_axis_bytes_per_step"] > 0
assert ("counterpart" in pl and pl["counterpart"] in keys) or "one node" in pl["not_applicable"]  # 4 ranks, 4 per node
assert pl["measured_s"]["top_pick"] == r["runs"][0]["measured"]["time_s"]
o = r["out_of_sample"]
assert len(o["halves"]) == 2
a, b = o["halves"]
assert sorted(a["fit_on"]) == sorted(b["scored_on"]) and sorted(b["fit_on"]) == sorted(a["scored_on"])
assert not set(a["fit_on"]) & set(a["scored_on"])  # never scored on what was fitted
assert o["pooled"]["fitted"]["n"] == 4 and o["pooled"]["fitted"]["mape"] >= 0
' "$tmp/r.json"
check "the SVG: a log-log scatter with the diagonal, and bars" '
import sys, xml.etree.ElementTree as ET
t = ET.parse(sys.argv[1]).getroot()
ns = "{http://www.w3.org/2000/svg}"
assert len(t.findall(f".//{ns}circle")) >= 4
assert any("predicted = measured" in (e.findtext(f"{ns}title") or "") for e in t.iter(f"{ns}line"))
assert len(t.findall(f".//{ns}rect")) > 8
' "$tmp/r.svg"

# Pass 1 runs the new configuration's repeat 1, pass 2 repeat 2 of all five.
expect 0 'spread' -- "$advisor" validate "${job[@]}" --max-configs 5 --repeats 2 --out "$tmp/r.json" --resume
grep -q 'resuming: 4 finished runs' "$tmp/expect.out" && echo "ok: resuming stated" || { echo "FAIL: resuming not stated"; failures=$((failures + 1)); }
[[ $(grep -c '^\[pass 1/2, [0-9]/5\] grid' "$tmp/expect.out") -eq 1 && $(grep -c '^\[pass 2/2, [0-9]/5\] grid' "$tmp/expect.out") -eq 5 ]] \
  && echo "ok: only the 6 missing repeats ran, in two passes" || { echo "FAIL: resume ran the wrong repeats"; cat "$tmp/expect.out"; failures=$((failures + 1)); }
check "resume: the first repeats kept as they were, a second added; medians and spread of the repeats" '
import json, os, statistics, sys
old, new = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert new["repeats"] == 2 and len(new["runs"]) == 5 and all(r["status"] == "ok" for r in new["runs"])
assert [r["key"] for r in new["runs"][:4]] == [r["key"] for r in old["runs"]], "finished runs moved"
relatives = []
for i, run in enumerate(new["runs"]):
    reps = run["repeats"]
    assert [x["repeat"] for x in reps] == [1, 2], reps
    if i < 4:
        assert reps[0] == old["runs"][i]["repeats"][0], "a finished repeat changed"
    for x in reps:
        assert x["status"] == "ok" and os.path.exists(x["log"]) and os.path.exists(x["record"])
        assert x["record"].endswith("_r%d.json" % x["repeat"])
    a, b = reps[0]["time_s"], reps[1]["time_s"]
    m = run["measured"]
    def close(x, y): return abs(x - y) <= 1e-12 * max(abs(x), abs(y), 1e-300)
    assert close(m["time_s"], (a + b) / 2), (m["time_s"], a, b)  # the median of two
    assert close(m["compute_s"], (reps[0]["compute_s"] + reps[1]["compute_s"]) / 2)
    for ax in ("x", "y", "z", "pipe", "data"):
        assert close(m["comm_s"][ax], (reps[0]["comm_s"][ax] + reps[1]["comm_s"][ax]) / 2)
    sp = m["spread"]
    assert sp["min_s"] == min(a, b) and sp["max_s"] == max(a, b) and m["repeats_ok"] == 2
    assert close(sp["relative"], (max(a, b) - min(a, b)) / ((a + b) / 2))
    relatives.append(sp["relative"])
s = new["summary"]
assert s["n"] == 5 and abs(s["median_spread"] - statistics.median(relatives)) <= 1e-12
assert new["placement"]["top_pick"] == new["runs"][0]["key"]
assert new["placement"]["measured_s"]["top_pick"] == new["runs"][0]["measured"]["time_s"]
' "$tmp/first.json" "$tmp/r.json"
grep -qE '^1 +[0-9,]+ [a-z]+ mb[0-9].* ok .*±[0-9.]+%' "$tmp/expect.out" && echo "ok: the table has a spread column" || { echo "FAIL: no spread in the table"; failures=$((failures + 1)); }
# A report priced by another advisor (its predictions set to 1000 s here):
# resumed, every run is priced again, as its scores are.
python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
for run in r["runs"]: run["predicted"]["time_s"] = 1000.0
json.dump(r, open(sys.argv[1], "w"))
' "$tmp/r.json"
# The plot of a resumed report says how many repeats its medians hold, not --repeats.
expect 0 'resuming: 5 finished runs' -- "$advisor" validate "${job[@]}" --max-configs 5 --repeats 1 --out "$tmp/r.json" --resume \
  --plot "$tmp/resumed.svg"
check "resumed: the runs priced again" '
import json, sys
first, new = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
by_key = {r["key"]: r["predicted"] for r in first["runs"]}
for r in new["runs"]:
    if r["key"] in by_key: assert r["predicted"] == by_key[r["key"]], (r["key"], r["predicted"]["time_s"])
    assert r["predicted"]["time_s"] < 1000.0
' "$tmp/first.json" "$tmp/r.json"
grep -q 'median of 2 runs each' "$tmp/resumed.svg" && echo "ok: the resumed plot counts the report's repeats" \
  || { echo "FAIL: the resumed plot's subtitle"; grep -o '[0-9]* configurations[^<]*' "$tmp/resumed.svg"; failures=$((failures + 1)); }

# --- a report from before repeats: read by calibrate, resumed into repeats ----
check "an old report: one measurement per run at the top, no repeats" '
import json, sys
r = json.load(open(sys.argv[1]))
r.pop("repeats"); r["format"] = "fourfold-validation/1"
for run in r["runs"]:
    one = run.pop("repeats")[0]
    for k in ("log", "record", "wall_s", "command"): run[k] = one.pop(k)
    one.pop("repeat"); one.pop("status")
    run["measured"] = one
json.dump(r, open(sys.argv[2], "w"))
' "$tmp/r.json" "$tmp/old.json"
expect 0 'refitted to 5 measured runs' -- "$advisor" calibrate --from-runs "$tmp/old.json" -o "$tmp/fitted-old.json"
expect 0 'resuming: 5 finished runs' -- "$advisor" validate "${job[@]}" --max-configs 5 --repeats 1 --out "$tmp/old.json" --resume
check "an old report resumed: each run its repeat 1, nothing ran again" '
import json, sys
old, new = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert len(new["runs"]) == 5
for a, b in zip(old["runs"], new["runs"]):
    assert len(b["repeats"]) == 1 and b["repeats"][0]["repeat"] == 1 and b["repeats"][0]["log"] == a["repeats"][0]["log"]
    assert b["measured"]["time_s"] == a["repeats"][0]["time_s"]
' "$tmp/r.json" "$tmp/old.json"

# --- the placement check on two nodes of two ---------------------------------
python3 -c '
import json, sys
p = json.load(open(sys.argv[1])); p["gpus_per_node"] = 2; p["name"] = "two-per-node"
json.dump(p, open(sys.argv[2], "w"))
' "$here/../../profiles/perlmutter.json" "$tmp/two.json"
expect 0 'Placement check: top pick' -- "$advisor" validate "${job[@]}" --machine "$tmp/two.json" --max-configs 2 --repeats 1 \
  --out "$tmp/p.json" --plot "$tmp/p.svg"
check "placement: the top pick and its counterpart, planned first, predicted and measured" '
import json, sys
r = json.load(open(sys.argv[1]))
pl = r["placement"]
assert "not_applicable" not in pl, pl
keys = [run["key"] for run in r["runs"]]
assert keys == [pl["top_pick"], pl["counterpart"]], (keys, pl)
top, other = r["runs"]
assert top["config"]["grid"] == other["config"]["grid"] and top["config"]["order"] != other["config"]["order"]
assert pl["heavy_axis_inside"] is True and pl["heavy_axis_bytes_per_step"] > 0
# the engine counts the same bytes on that axis as the prediction
assert top["measured"]["bytes_per_step"][pl["heavy_axis"]] == pl["heavy_axis_bytes_per_step"]
assert pl["predicted_s"]["top_pick"] == top["predicted"]["time_s"] and pl["predicted_s"]["counterpart"] == other["predicted"]["time_s"]
assert pl["holds_predicted"] is True
assert pl["measured_s"] == {"top_pick": top["measured"]["time_s"], "counterpart": other["measured"]["time_s"]}
assert pl["holds_measured"] == (top["measured"]["time_s"] < other["measured"]["time_s"])
' "$tmp/p.json"
check "the SVG rings the pair" '
import sys
t = open(sys.argv[1]).read()
assert ">top pick<" in t and ">across nodes<" in t
' "$tmp/p.svg"

# --- the refit: a profile the advisor loads ---------------------------------
expect 0 'refitted to 5 measured runs' -- "$advisor" calibrate --from-runs "$tmp/r.json" -o "$tmp/fitted.json"
expect 0 'Time per iteration' -- "$advisor" predict --model "$model" --gpus 4 --grid 2,1,1,2 --batch 8 --dtype fp32 --machine "$tmp/fitted.json"
check "fitted profile: kind, factors, source runs" '
import json, sys
p = json.load(open(sys.argv[1]))
f = p["fitted"]
assert f["kind"] == "fitted" and len(f["source"]["runs"]) == 5
assert set(f["factors"]) == {"intra_bw_scale", "inter_bw_scale", "alpha_scale", "gemm_scale", "elementwise_scale", "overlap_efficiency",
                          "nonblocking_slowdown_scale"}
assert "inter_bw_scale" in f["held"]  # 4 ranks on one 4-GPU node: nothing crosses nodes
' "$tmp/fitted.json"

# --- a run that fails is recorded, the others go on ----------------------------
expect 1 'FAILED \(timed out' -- "$advisor" validate "${job[@]}" --max-configs 2 --repeats 2 --run-timeout 0.05 --out "$tmp/t.json"
grep -q '4 of 4 runs of the engine failed' "$tmp/expect.out" && echo "ok: the failures are counted" || { echo "FAIL: failures not counted"; failures=$((failures + 1)); }
check "failed runs are recorded with their error and log tail, per repeat" '
import json, sys
r = json.load(open(sys.argv[1]))
assert len(r["runs"]) == 2 and all(x["status"] == "failed" and "timed out" in x["error"] for x in r["runs"])
for x in r["runs"]:
    assert [y["repeat"] for y in x["repeats"]] == [1, 2] and "measured" not in x
    assert all(y["status"] == "failed" and "timed out" in y["error"] and "log_tail" in y for y in x["repeats"])
assert r["summary"]["n"] == 0
' "$tmp/t.json"

# --- bad input: exit 2, a clear message, nothing written ----------------------
bad=(--model "$model" --batch 8 --steps 3 --engine "$engine")
expect 2 "'no-such-launcher' not found" -- "$advisor" validate "${bad[@]}" --ranks 4 --launcher "no-such-launcher -np 4" --out "$tmp/b.json"
nothing_at "$tmp/b.json"
expect 2 'not an executable' -- "$advisor" validate --model "$model" --ranks 4 --engine "$tmp/no/engine" --launcher "$launcher" --out "$tmp/b.json"
nothing_at "$tmp/b.json"
expect 2 'at least 1 rank' -- "$advisor" validate "${bad[@]}" --ranks 0 --launcher "$launcher" --out "$tmp/b.json"
nothing_at "$tmp/b.json"
expect 2 '--repeats 0: expected at least 1' -- "$advisor" validate "${bad[@]}" --ranks 4 --launcher "$launcher" --repeats 0 --out "$tmp/b.json"
nothing_at "$tmp/b.json"
expect 2 'unclosed' -- "$advisor" validate "${bad[@]}" --ranks 4 --launcher "mpirun -np '4" --out "$tmp/b.json"
nothing_at "$tmp/b.json"
cp "$tmp/r.json" "$tmp/before.json"
expect 2 'another job' -- "$advisor" validate --model "$model" --ranks 4 --batch 16 --steps 3 --engine "$engine" \
  --launcher "$launcher" --out "$tmp/r.json" --resume
cmp -s "$tmp/r.json" "$tmp/before.json" && echo "ok: the other job's report is untouched" || { echo "FAIL: report changed"; failures=$((failures + 1)); }
expect 2 'exists: --resume' -- "$advisor" validate "${job[@]}" --out "$tmp/r.json"
expect 2 'no successful runs' -- "$advisor" calibrate --from-runs "$tmp/t.json" -o "$tmp/f2.json"
nothing_at "$tmp/f2.json"

# --- the filter group, recommend's: only what the flags leave runs (~6 s) ------
expect 0 'In sample' -- "$advisor" validate "${job[@]}" --max-configs 2 --repeats 1 --out "$tmp/f.json" \
  --shard-optimizer --overlap ors,odp --order xyzd --micro-batch 1 --no-recompute
check "filters: every run sharded, overlap ors,odp, order xyzd, micro-batch 1, no recompute; none offloaded" '
import json, sys
r = json.load(open(sys.argv[1]))
assert len(r["runs"]) == 2, len(r["runs"])
for run in r["runs"]:
    c = run["config"]
    assert run["status"] == "ok", run
    assert c["shard_optimizer"] is True and c["offload"] is False, c
    assert c["grid"]["data"] > 1, c  # nothing to shard over otherwise
    assert c["overlap"] == {"oar": False, "ors": True, "oag": False, "odp": True, "otp": False}, c
    assert c["order"] == "xyzpd" and c["micro_batch"] == 1 and c["recompute"] == "none", c
' "$tmp/f.json"
expect 2 '--micro-batch 0: expected sequences per rank >= 1' -- "$advisor" validate "${job[@]}" --micro-batch 0 \
  --out "$tmp/f0.json"
nothing_at "$tmp/f0.json"

if [[ $failures -ne 0 ]]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all validate checks passed"
