#!/usr/bin/env bash
# Ctrl-C keeps the tools' promises: `measure` interrupted mid-run leaves no
# profile, no record and no temporary; `advisor validate` interrupted
# mid-run leaves a report of exactly the runs that finished (valid JSON, no
# temporary), and --resume completes it. And every file the tools write goes
# through write_file_atomic (a temporary and a rename, signals held back).
# Ctrl-C is sent as a terminal sends it: SIGINT to the foreground process
# group, here the background job's own group (set -m).
# Usage: interrupt_test.sh MPIRUN MEASURE ADVISOR SOURCE_ROOT
set -u
set -m
MPIRUN=$1 MEASURE=$2 ADVISOR=$3 ROOT=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
source "$(dirname "$0")/expect.sh"
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }

# wait_for SECONDS COMMAND...: until the command succeeds; false on timeout.
wait_for() {
  local end=$((SECONDS + $1))
  shift
  until "$@"; do
    ((SECONDS < end)) || return 1
    sleep 0.2
  done
}
# ctrl_c PID: SIGINT to the job's process group, then its exit code (124 if
# it is still running 60 s later, when it is killed).
ctrl_c() {
  kill -INT -- "-$1"
  local end=$((SECONDS + 60))
  while kill -0 "$1" 2>/dev/null && ((SECONDS < end)); do sleep 0.2; done
  if kill -0 "$1" 2>/dev/null; then
    kill -KILL -- "-$1"
    wait "$1"
    return 124
  fi
  wait "$1"
}
no_temporaries() {
  if compgen -G "$1/*.tmp.*" >/dev/null; then fail "a temporary left in $1: $(ls "$1")"; else pass "no temporary in $1"; fi
}

# --- every file written atomically -------------------------------------------
# The only other file a tool opens for writing is the log of a run validate
# starts, appended to as the run goes (advisor/cli/child_process.cpp).
writers=$(grep -nE 'ofstream|fopen|O_CREAT|O_WRONLY|std::rename|creat\(' \
  "$ROOT"/advisor/*.cpp "$ROOT"/advisor/cli/*.cpp "$ROOT"/engine/*.cpp "$ROOT"/measure/*.cpp |
  grep -v '/advisor/output/atomic_file.cpp:' | grep -v '/advisor/cli/child_process.cpp:.*O_WRONLY | O_CREAT | O_APPEND')
if [[ -z $writers ]]; then pass "every file the tools write goes through write_file_atomic"; else fail "files written otherwise:"$'\n'"$writers"; fi

# --- measure: Ctrl-C mid-run leaves nothing -----------------------------------
mkdir "$tmp/m"
"$MPIRUN" -np 2 --oversubscribe "$MEASURE" --backend mpi --gpus-per-node 2 --repeats 50 \
  --out "$tmp/m/p.json" --raw "$tmp/m/raw.json" >"$tmp/m.out" 2>"$tmp/m.err" &
pid=$!
if wait_for 60 grep -q '^\[[0-9]*/[0-9]*\]' "$tmp/m.err"; then
  pass "measure is running (a progress line)"
else
  fail "measure printed no progress in 60 s"; cat "$tmp/m.err"
fi
ctrl_c "$pid"
rc=$?
[[ $rc -ne 0 && $rc -ne 124 ]] && pass "measure interrupted exits $rc" || fail "measure after Ctrl-C: exit $rc"
if [[ -e $tmp/m/p.json || -e $tmp/m/raw.json ]]; then fail "measure interrupted left a profile or record"; else pass "no profile, no record"; fi
no_temporaries "$tmp/m"

# --- validate: Ctrl-C mid-run keeps the finished runs, --resume completes ----
# The launcher stands in for mpirun and the engine: it writes the record a
# run of the configuration it is given would write, and on the run numbered
# in $tmp/hang_at it says so and waits, to be interrupted.
cat >"$tmp/launcher.py" <<'PY'
import json, os, sys, time
state, args = sys.argv[1], sys.argv[2:]
arg = lambda name: args[args.index(name) + 1]
count = os.path.join(state, "count")
n = (int(open(count).read()) if os.path.exists(count) else 0) + 1
open(count, "w").write(str(n))
hang = os.path.join(state, "hang_at")
if os.path.exists(hang) and int(open(hang).read()) == n:
    open(os.path.join(state, "hanging"), "w").close()
    time.sleep(300)
    sys.exit(1)
x, y, z, d = (int(v) for v in arg("--grid").split(","))
overlap = arg("--overlap").split(",")
rc = "none"  # a bare --recompute is full
if "--recompute" in args:
    at = args.index("--recompute") + 1
    rc = args[at] if at < len(args) and args[at] in ("none", "selective", "full") else "full"
config = {"grid": {"x": x, "y": y, "z": z, "data": d}, "order": arg("--order"),
          "micro_batch": int(arg("--micro-batch")), "recompute": rc,
          "overlap": {k: k in overlap for k in ("oar", "ors", "oag")}, "dtype": "fp32"}
steps = [{"time_s": 0.01 * (1 + n + i), "compute_s": 0.004, "comm_s": {"x": 0.001, "y": 0.001, "z": 0.0, "data": 0.002}}
         for i in range(int(arg("--steps")))]
rec = arg("--record")
json.dump({"config": config, "steps": steps}, open(rec + ".part", "w"))
os.rename(rec + ".part", rec)
label = "%d,%d,%d,%d %s mb%d%s%s" % (x, y, z, d, arg("--order"), config["micro_batch"],
                                     {"none": " ", "selective": " src ", "full": " rc "}[rc], arg("--overlap"))
open(os.path.join(state, "finished"), "a").write(label + "\n")
PY
mkdir "$tmp/v"
echo 3 >"$tmp/hang_at"
job=(--model "$ROOT/tests/validate/gpt-val.json" --ranks 4 --batch 8 --steps 3 --engine /bin/true
     --launcher "python3 $tmp/launcher.py $tmp" --max-configs 4 --repeats 1 --out "$tmp/v/report.json")
"$ADVISOR" validate "${job[@]}" >"$tmp/v.out" 2>"$tmp/v.err" &
pid=$!
wait_for 60 test -e "$tmp/hanging" && pass "validate is in its third run" || { fail "validate never reached its third run"; cat "$tmp/v.err"; }
ctrl_c "$pid"
rc=$?
[[ $rc -eq 130 ]] && pass "validate interrupted exits 130" || { fail "validate after Ctrl-C: exit $rc (want 130)"; cat "$tmp/v.err"; }
grep -q 'interrupted; 2 runs with finished repeats are in' "$tmp/v.err" && pass "it says what it kept" ||
  { fail "no 'interrupted; 2 runs' message"; cat "$tmp/v.err"; }
no_temporaries "$tmp/v"
check "the report holds exactly the two runs that finished, as they finished" '
import json, sys
r = json.load(open(sys.argv[1]))
finished = open(sys.argv[2]).read().split("\n")[:-1]
assert [x["key"] for x in r["runs"]] == finished, ([x["key"] for x in r["runs"]], finished)
for x in r["runs"]:
    assert x["status"] == "ok" and [y["repeat"] for y in x["repeats"]] == [1], x
    assert x["repeats"][0]["status"] == "ok" and x["measured"]["time_s"] > 0
assert r["summary"]["n"] == 2
' "$tmp/v/report.json" "$tmp/finished"
cp "$tmp/v/report.json" "$tmp/interrupted.json"

rm "$tmp/hang_at"
expect 0 'resuming: 2 finished runs kept' -- "$ADVISOR" validate "${job[@]}" --resume
check "--resume ran the other two and kept the first two as they were" '
import json, sys
old, new, count = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), int(open(sys.argv[3]).read())
assert count == 5, count  # 2 finished, 1 interrupted, 2 on resume
assert len(new["runs"]) == 4 and all(x["status"] == "ok" for x in new["runs"])
assert new["runs"][:2] == old["runs"], "a finished run changed"
assert new["summary"]["n"] == 4 and "halves" in new["out_of_sample"]
' "$tmp/interrupted.json" "$tmp/v/report.json" "$tmp/count"
no_temporaries "$tmp/v"

if [[ $failures -ne 0 ]]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all interrupt checks passed"
