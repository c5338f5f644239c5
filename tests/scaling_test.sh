#!/usr/bin/env bash
# advisor scaling end to end: the table, CSV, JSON and SVG; each point's JSON
# is recommend --top 1's at that count; a count where nothing fits says why;
# bad sweeps exit 2 naming the flag. Usage: scaling_test.sh path/to/advisor
set -u
advisor=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0

source "$(dirname "$0")/expect.sh"

# same_as_recommend NAME JSON [FILTER...]: each point of a scaling --json is
# recommend --top 1 at its count, for its model and batch, under the same
# filters (but the search's time and threads).
same_as_recommend() {
  local name=$1 json=$2
  shift 2
  check "$name: each point is recommend --top 1 at its count (but the search's time and threads)" '
import json, subprocess, sys
for x in json.load(open(sys.argv[1]))["points"]:
    r = json.loads(subprocess.check_output([sys.argv[2], "recommend", "--model", x["model"], "--machine", "perlmutter",
        "--gpus", str(x["gpus"]), "--batch", str(x["batch_sequences"]), "--top", "1", "--json"] + sys.argv[3:],
        stderr=subprocess.DEVNULL))
    a = dict(x["recommend"])
    for k in ("search_seconds", "search_threads"):
        a.pop(k), r.pop(k)
    assert a == r, x["gpus"]
' "$json" "$advisor" "$@"
}

# The issue's two sweeps: under the sanitizers (FF_SANITIZED=1) they take
# minutes; the same code runs on the smaller sweeps below.
if [[ -z ${FF_SANITIZED:-} ]]; then
  expect 0 '4,096 .*yZd' -- "$advisor" scaling --model gpt-80b --machine perlmutter --gpus 64..4096
  "$advisor" scaling --weak --model gpt-5b,gpt-10b,gpt-20b,gpt-40b --machine perlmutter --gpus 512..4096 --json \
    --plot "$tmp/weak.svg" >"$tmp/weak.json"
  check "weak sweep: one model per count, one batch, MFU ratios" '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["sweep"] == "weak-models" and d["efficiency_base_gpus"] == 512
p = d["points"]
assert [x["gpus"] for x in p] == [512, 1024, 2048, 4096]
assert [x["model"] for x in p] == ["gpt-5b", "gpt-10b", "gpt-20b", "gpt-40b"]
assert all(x["found"] and x["batch_sequences"] == 2048 for x in p)
for x in p:
    assert abs(x["efficiency"] - x["mfu"] / p[0]["mfu"]) < 1e-9 * x["efficiency"]
    assert x["time_low_s"] < x["time_s"] < x["time_high_s"]
' "$tmp/weak.json"
  same_as_recommend "weak sweep" "$tmp/weak.json"
  expect 0 'svg ok' -- python3 -c "import xml.dom.minidom as m,sys; d=m.parse('$tmp/weak.svg'); assert d.documentElement.tagName=='svg'; print('svg ok')"
else
  echo "skipped under the sanitizers: the gpt-80b and weak sweeps (FF_SANITIZED)"
fi

# Strong scaling of gpt-20b over 32..256 GPUs (under the sanitizers gpt-5b
# over 8..32, the same checks on smaller searches): JSON, CSV and the picture.
# Two of recommend's filters, which change the best configuration at every
# count of gpt-20b's sweep (its best without them has 2 stages and a sharded
# optimizer), so a filter scaling dropped would show against recommend.
model=gpt-20b first=32 last=256
[[ -n ${FF_SANITIZED:-} ]] && model=gpt-5b first=8 last=32
filters=(--pipeline 1,4 --no-shard-optimizer)
"$advisor" scaling --model $model --machine perlmutter --gpus $first..$last "${filters[@]}" --json \
  --plot "$tmp/strong.svg" --deadline-days 30 --max-gpu-hours 6.1e4 >"$tmp/strong.json"
"$advisor" scaling --model $model --machine perlmutter --gpus $first..$last "${filters[@]}" --csv >"$tmp/strong.csv"
"$advisor" scaling --model $model --machine perlmutter --gpus $first..$last "${filters[@]}" >"$tmp/strong.txt"
check "strong sweep: efficiency, days, GPU-hours and the budgets by hand from each point's own numbers" '
import json, sys
d = json.load(open(sys.argv[1]))
p = d["points"]
first, last = int(sys.argv[2]), int(sys.argv[3])
counts = [first]
while counts[-1] < last:
    counts.append(2 * counts[-1])
assert d["sweep"] == "strong" and [x["gpus"] for x in p] == counts
assert len({x["batch_sequences"] for x in p}) == 1  # one batch at every count
b = p[0]
for x in p:
    assert abs(x["efficiency"] - b["time_s"] * first / (x["time_s"] * x["gpus"])) < 1e-9
    tokens = x["recommend"]["train_tokens"]
    assert abs(x["days"] - tokens / x["tokens_per_s"] / 86400) < 1e-9 * x["days"]
    assert abs(x["gpu_hours"] - tokens / x["tokens_per_s"] / 3600 * x["gpus"]) < 1e-9 * x["gpu_hours"]
meets = [x for x in p if x["days"] <= 30]
want = min(meets, key=lambda x: (x["gpu_hours"], x["gpus"]))["gpus"] if meets else None
assert d["deadline_days"]["gpus"] == want, (d["deadline_days"], want)
within = [x for x in p if x["gpu_hours"] <= 6.1e4]
want = min(within, key=lambda x: (x["days"], x["gpu_hours"]))["gpus"] if within else None
assert d["max_gpu_hours"]["gpus"] == want, (d["max_gpu_hours"], want)
' "$tmp/strong.json" $first $last
same_as_recommend "strong sweep" "$tmp/strong.json" "${filters[@]}"
check "the CSV says what the JSON says" '
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1])))
p = json.load(open(sys.argv[2]))["points"]
assert len(rows) == len(p)
for r, x in zip(rows, p):
    c = x["recommend"]["configs"][0]
    assert int(r["gpus"]) == x["gpus"] and r["found"] == "1"
    assert r["grid"] == "%d,%d,%d,%d" % (c["grid"]["x"], c["grid"]["y"], c["grid"]["z"], c["grid"]["data"])
    assert int(r["pipeline"]) == c["grid"]["pipe"] and r["shape"] == x["shape"]
    for k in ("time_s", "tokens_per_s", "mfu", "efficiency", "days", "gpu_hours", "time_low_s", "time_high_s"):
        assert abs(float(r[k]) - x[k]) <= 1e-8 * abs(x[k]), k
' "$tmp/strong.csv" "$tmp/strong.json"
expect 0 'svg ok' -- python3 -c "import xml.dom.minidom as m,sys; d=m.parse('$tmp/strong.svg'); assert d.documentElement.tagName=='svg'; print('svg ok')"
expect 0 "efficiency: model FLOP/s per GPU against $first GPUs" -- cat "$tmp/strong.txt"
expect 0 "^ +$last +1," -- cat "$tmp/strong.txt"

# The batch grows with the count under --weak: 2,048 sequences at 32 GPUs, 16,384 at 256.
expect 0 '256 +16,384 ' -- "$advisor" scaling --weak --model gpt-5b --machine perlmutter --gpus 32..256
# Where nothing fits the table says so and the reason follows; where nothing fits anywhere, exit 3.
expect 0 'nothing fits \(below\)' -- "$advisor" scaling --model gpt-80b --machine perlmutter --gpus 8,64
expect 0 '8 GPUs: no configuration of gpt-80b on 8 GPUs fits' -- "$advisor" scaling --model gpt-80b --machine perlmutter --gpus 8,64
expect 3 'nothing fits or divides at any count' -- "$advisor" scaling --model gpt-640b --gpus 8..16

# Bad sweeps: exit 2, naming the flag.
expect 2 '--gpus 64..1000: a range doubles from its start' -- "$advisor" scaling --model gpt-5b --gpus 64..1000
expect 2 '--gpus 128,64: list the counts in increasing order' -- "$advisor" scaling --model gpt-5b --gpus 128,64
expect 2 "--gpus 'x'" -- "$advisor" scaling --model gpt-5b --gpus 64..x
expect 2 '--model gpt-5b,gpt-10b: one model per GPU count is weak scaling; add --weak' -- \
  "$advisor" scaling --model gpt-5b,gpt-10b --gpus 64,128
expect 2 '--model gpt-5b,gpt-10b: 2 models for 3 GPU counts' -- "$advisor" scaling --weak --model gpt-5b,gpt-10b --gpus 64..256
expect 2 '--deadline-days: a budget compares counts that train one model' -- \
  "$advisor" scaling --weak --model gpt-5b,gpt-10b --gpus 64,128 --deadline-days 10
expect 2 '--max-gpu-hours -1.0: expected a positive number' -- "$advisor" scaling --model gpt-5b --gpus 64 --max-gpu-hours -1
expect 2 '--deadline-days 0.0: expected a positive number' -- "$advisor" scaling --model gpt-5b --gpus 64 --deadline-days 0
expect 2 '--weak: batch 3 × 96/64 GPUs is not a whole number' -- "$advisor" scaling --weak --model gpt-5b --gpus 64,96 --batch 3
expect 2 '--tokens: expected a positive number of tokens' -- "$advisor" scaling --model gpt-5b --gpus 64 --tokens 0
expect 2 '--tokens: expected a positive number of tokens' -- "$advisor" recommend --model gpt-5b --gpus 64 --tokens -1
expect 2 "unknown model 'gpt-7b'" -- "$advisor" scaling --model gpt-7b --gpus 64
expect 2 '--csv excludes --json|excludes' -- "$advisor" scaling --model gpt-5b --gpus 64 --json --csv
expect 2 'scaling.svg: cannot write' -- "$advisor" scaling --model gpt-5b --gpus 64 --plot /nonexistent-dir/scaling.svg

if [[ $failures -ne 0 ]]; then
  echo "$failures scaling check(s) failed"
  exit 1
fi
