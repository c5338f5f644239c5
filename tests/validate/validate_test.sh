#!/usr/bin/env bash
# `advisor validate` end to end: the engine run on a sample of one job's
# configurations under mpirun, the report's fields, --resume running only
# what is new, the SVG, `calibrate --from-runs`, a run that fails, and bad
# input exiting 2 with a clear message and no file left behind.
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

# --- a sample of 4, then 2 more with --resume -------------------------------
expect 0 'In sample' -- "$advisor" validate "${job[@]}" --max-configs 4 --out "$tmp/r.json" --plot "$tmp/r.svg"
grep -q 'stated sample of 4' "$tmp/expect.out" && echo "ok: the sample is stated" || { echo "FAIL: sample not stated"; failures=$((failures + 1)); }
[[ $(grep -c '^\[[0-9]/4\] grid' "$tmp/expect.out") -eq 4 ]] && echo "ok: 4 progress lines" || { echo "FAIL: progress lines"; failures=$((failures + 1)); }
cp "$tmp/r.json" "$tmp/first.json"
check "report: job, sample, 4 successful runs, predicted and measured per axis, scores" '
import json, math, sys
r = json.load(open(sys.argv[1]))
assert r["job"]["ranks"] == 4 and r["job"]["batch_sequences"] == 8 and r["job"]["steps"] == 3 and r["job"]["dtype"] == "fp32"
assert r["job"]["model"]["name"] == "gpt-val"
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
    assert p["time_s"] > 0 and set(p["exposed_comm_s"]) == {"x", "y", "z", "data"}
    assert m["time_s"] > 0 and set(m["comm_s"]) == {"x", "y", "z", "data"}
    assert len(m["steps"]) == 3 and m["steps_discarded"] == 1
    times = sorted(s["time_s"] for s in m["steps"][1:])
    assert abs(m["time_s"] - (times[0] + times[1]) / 2) <= 1e-12 * m["time_s"]  # median of steps 2..3
assert len(grids) == 4, grids  # round-robin: four runs, four grid shapes
s = r["summary"]
assert s["n"] == 4 and s["mape"] >= 0 and -1 <= s["spearman"] <= 1 and -1 <= s["kendall"] <= 1 and s["regret"] >= 0
keys = [run["key"] for run in r["runs"]]
assert s["top_pick"] in keys and s["measured_best"] in keys
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

expect 0 'resuming: 4 finished runs' -- "$advisor" validate "${job[@]}" --max-configs 6 --out "$tmp/r.json" --resume
[[ $(grep -c '^\[[0-9]/6\] grid' "$tmp/expect.out") -eq 2 ]] && echo "ok: only the 2 new runs ran" || { echo "FAIL: resume reran"; cat "$tmp/expect.out"; failures=$((failures + 1)); }
check "resume: the 4 earlier runs kept as they were, 2 more" '
import json, sys
old, new = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert len(new["runs"]) == 6 and all(r["status"] == "ok" for r in new["runs"])
assert new["runs"][:4] == old["runs"], "finished runs changed"
assert new["summary"]["n"] == 6
' "$tmp/first.json" "$tmp/r.json"

# --- the refit: a profile the advisor loads ---------------------------------
expect 0 'refitted to 6 measured runs' -- "$advisor" calibrate --from-runs "$tmp/r.json" -o "$tmp/fitted.json"
expect 0 'Time per iteration' -- "$advisor" predict --model "$model" --gpus 4 --grid 2,1,1,2 --batch 8 --dtype fp32 --machine "$tmp/fitted.json"
check "fitted profile: kind, factors, source runs" '
import json, sys
p = json.load(open(sys.argv[1]))
f = p["fitted"]
assert f["kind"] == "fitted" and len(f["source"]["runs"]) == 6
assert set(f["factors"]) == {"intra_bw_scale", "inter_bw_scale", "alpha_scale", "gemm_scale", "elementwise_scale", "overlap_efficiency",
                          "nonblocking_slowdown_scale"}
assert "inter_bw_scale" in f["held"]  # 4 ranks on one 4-GPU node: nothing crosses nodes
' "$tmp/fitted.json"

# --- a run that fails is recorded, the others go on ----------------------------
expect 1 'FAILED \(timed out' -- "$advisor" validate "${job[@]}" --max-configs 2 --run-timeout 0.05 --out "$tmp/t.json"
check "failed runs are recorded with their error and log tail" '
import json, sys
r = json.load(open(sys.argv[1]))
assert len(r["runs"]) == 2 and all(x["status"] == "failed" and "timed out" in x["error"] for x in r["runs"])
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
expect 2 'unclosed' -- "$advisor" validate "${bad[@]}" --ranks 4 --launcher "mpirun -np '4" --out "$tmp/b.json"
nothing_at "$tmp/b.json"
cp "$tmp/r.json" "$tmp/before.json"
expect 2 'another job' -- "$advisor" validate --model "$model" --ranks 4 --batch 16 --steps 3 --engine "$engine" \
  --launcher "$launcher" --out "$tmp/r.json" --resume
cmp -s "$tmp/r.json" "$tmp/before.json" && echo "ok: the other job's report is untouched" || { echo "FAIL: report changed"; failures=$((failures + 1)); }
expect 2 'exists: --resume' -- "$advisor" validate "${job[@]}" --out "$tmp/r.json"
expect 2 'no successful runs' -- "$advisor" calibrate --from-runs "$tmp/t.json" -o "$tmp/f2.json"
nothing_at "$tmp/f2.json"

if [[ $failures -ne 0 ]]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all validate checks passed"
