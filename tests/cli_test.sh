#!/usr/bin/env bash
# The advisor CLI end to end: answers, JSON, SVG, and every bad input a clear
# message with a non-zero exit. Usage: cli_test.sh path/to/advisor
set -u
advisor=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0

# expect CODE PATTERN -- command...: exit code CODE and PATTERN in stdout+stderr.
expect() {
  local code=$1 pattern=$2
  shift 3
  local out rc
  out=$("$@" 2>&1)
  rc=$?
  if [[ $rc -ne $code ]] || ! grep -qE -- "$pattern" <<<"$out"; then
    echo "FAIL: $* -> exit $rc (want $code), pattern '$pattern'"
    echo "$out" | head -15
    failures=$((failures + 1))
  else
    echo "ok: $*"
  fi
}

expect 0 'evaluated [0-9,]+ configurations' -- "$advisor" recommend --model gpt-80b --gpus 1024
expect 0 'gpt-640b' -- "$advisor" models
expect 0 'perlmutter \(default\)' -- "$advisor" machines
expect 0 'Time per iteration' -- "$advisor" predict --model gpt-80b --gpus 1024 --grid 4,2,16,8 --recompute --overlap all
# The issue's large cases: a ranked answer whose numbers are physically possible.
cat >"$tmp/sensible.py" <<'PY'
import json, sys
d, capacity = json.load(open(sys.argv[1])), float(sys.argv[2])
assert d["configs"], "no configs"
for c in d["configs"]:
    g = c["grid"]
    assert g["x"] * g["y"] * g["z"] * g["data"] == d["gpus"]
    assert 0.02 < c["mfu"] < 0.8, c["mfu"]
    assert 0 < c["memory_gib"] <= capacity, c["memory_gib"]
    assert 0 < c["compute_s"] <= c["time_s"]
print("sensible", d["configs"][0]["grid"])
PY
"$advisor" recommend --model gpt-60b --gpus 6144 --machine alps --top 3 --json >"$tmp/alps.json"
expect 0 'sensible' -- python3 "$tmp/sensible.py" "$tmp/alps.json" 96
"$advisor" recommend --model gpt-320b --gpus 32768 --machine frontier --top 3 --json >"$tmp/frontier.json"
expect 0 'sensible' -- python3 "$tmp/sensible.py" "$tmp/frontier.json" 64

# JSON contract (DESIGN §3): top-level fields, a config record per entry, sorted by time_s.
"$advisor" recommend --model gpt-20b --gpus 64 --json --top 5 --plot "$tmp/top.svg" >"$tmp/rec.json"
expect 0 'contract ok' -- python3 - "$tmp/rec.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for k in ["model", "machine", "gpus", "batch_sequences", "seq_len", "dtype", "evaluated", "feasible", "configs"]:
    assert k in d, k
assert d["gpus"] == 64 and d["model"] == "gpt-20b" and d["evaluated"] >= d["feasible"] > 0
c = d["configs"]
assert len(c) == 5
times = [x["time_s"] for x in c]
assert times == sorted(times), times
for x in c:
    g = x["grid"]
    assert g["x"] * g["y"] * g["z"] * g["data"] == 64
    assert sorted(x["order"]) == sorted("xyzd")
    assert set(x["overlap"]) == {"oar", "ors", "oag"}
    assert set(x["exposed_comm_s"]) == {"x", "y", "z", "data"}
    for k in ["micro_batch", "recompute", "dtype", "time_s", "compute_s", "memory_gib", "mfu", "tokens_per_s"]:
        assert k in x, k
    assert abs(x["compute_s"] + sum(x["exposed_comm_s"].values()) - x["time_s"]) < 1e-9 * x["time_s"]
    assert 0 < x["mfu"] < 1
print("contract ok")
PY
expect 0 'svg ok' -- python3 -c "import xml.dom.minidom as m,sys; d=m.parse('$tmp/top.svg'); assert d.documentElement.tagName=='svg'; print('svg ok')"

# --order restricts the search to one placement: each config's non-trivial
# axes appear in the order z, y, x, d.
"$advisor" recommend --model gpt-20b --gpus 64 --order zyxd --json --top 8 >"$tmp/order.json"
expect 0 'order ok' -- python3 - "$tmp/order.json" <<'PY'
import json, sys
for c in json.load(open(sys.argv[1]))["configs"]:
    g = c["grid"]
    size = {"x": g["x"], "y": g["y"], "z": g["z"], "d": g["data"]}
    placed = [a for a in c["order"] if size[a] > 1]
    assert placed == [a for a in "zyxd" if size[a] > 1], (c["order"], g)
print("order ok")
PY

# Bad input.
expect 2 'unknown model .*gpt-80b' -- "$advisor" recommend --model gpt-81b --gpus 1024
expect 2 'unknown machine .*perlmutter' -- "$advisor" recommend --model gpt-80b --gpus 1024 --machine summit
for g in 0 -4 1.5 abc; do
  expect 2 "expected a whole number of GPUs" -- "$advisor" recommend --model gpt-80b --gpus "$g"
done
expect 2 'no grid of 7 GPUs can split' -- "$advisor" recommend --model gpt-80b --gpus 7
expect 3 'needs at least [0-9,]+ GPUs' -- "$advisor" recommend --model gpt-640b --gpus 8
expect 2 'has 8 ranks, not --gpus 16' -- "$advisor" predict --model gpt-5b --gpus 16 --grid 2,2,2,1
expect 2 'not divisible by G_x=3' -- "$advisor" predict --model gpt-5b --gpus 3 --grid 3,1,1,1
expect 3 'does not fit' -- "$advisor" predict --model gpt-80b --gpus 8 --grid 8,1,1,1
expect 2 "--order 'xyz'" -- "$advisor" predict --model gpt-5b --gpus 8 --grid 2,2,2,1 --order xyz
expect 2 "--overlap 'oar,foo'" -- "$advisor" predict --model gpt-5b --gpus 8 --grid 2,2,2,1 --overlap oar,foo
expect 2 "--batch 0: expected a number of sequences" -- "$advisor" recommend --model gpt-5b --gpus 8 --batch 0
expect 2 "x.svg: cannot write" -- "$advisor" recommend --model gpt-5b --gpus 8 --plot /nonexistent-dir/x.svg
expect 2 "--batch-tokens 100: expected a positive multiple" -- "$advisor" recommend --model gpt-5b --gpus 8 --batch-tokens 100
expect 2 "--dtype .fp16.: expected bf16 or fp32" -- "$advisor" recommend --model gpt-5b --gpus 8 --dtype fp16

echo '{"layers": 2, "hidden": 64, "heads": 4,' >"$tmp/broken.json"
expect 2 "broken.json: malformed JSON near line" -- "$advisor" recommend --model "$tmp/broken.json" --gpus 8
echo '{"layers": 2, "hidden": 64, "heads": 4, "vocab": 100}' >"$tmp/nolen.json"
expect 2 "nolen.json: field 'seq_len' is missing" -- "$advisor" recommend --model "$tmp/nolen.json" --gpus 8
echo '{"layers": 2, "hidden": 64, "heads": 5, "vocab": 100, "seq_len": 32}' >"$tmp/heads.json"
expect 2 "heads.json: field 'heads': expected a divisor of hidden" -- "$advisor" recommend --model "$tmp/heads.json" --gpus 8
expect 2 "missing.json: cannot open" -- "$advisor" recommend --model "$tmp/missing.json" --gpus 8
sed 's/"gpus_per_node": 4/"gpus_per_node": "four"/' "$(dirname "$0")/../profiles/perlmutter.json" >"$tmp/bad-profile.json"
expect 2 "bad-profile.json: field 'gpus_per_node': expected an integer" -- "$advisor" recommend --model gpt-5b --gpus 8 --machine "$tmp/bad-profile.json"

# A small custom model runs.
echo '{"name": "tiny", "layers": 2, "hidden": 64, "heads": 4, "vocab": 256, "seq_len": 32}' >"$tmp/tiny.json"
expect 0 'tiny' -- "$advisor" recommend --model "$tmp/tiny.json" --gpus 8 --batch 16

if [[ $failures -ne 0 ]]; then
  echo "$failures CLI check(s) failed"
  exit 1
fi
