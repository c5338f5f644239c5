#!/usr/bin/env bash
# examples/cluster/validate.sh end to end, kept short (about 40 s on 2 cores):
#
#   validate_sh_test.sh VALIDATE_SH BUILD_DIR
#
# 4 nodes x 2 ranks at 200mbit, a small measure (64K..1M, one repeat, blocking
# only) with --poll-us 50, then `advisor validate --device paced` on 3
# configurations of one repeat of 3 steps: the profile says poll_us 50, the
# report is paced with all 3 runs ok, and the cluster is down afterwards. Then
# again into the same directory with 5 configurations, interrupted once the
# first new run is under way: the profile is reused, the report resumed, the
# exit code 130, and the cluster down again.
# Exit 77 (skipped) where namespaces cannot be created (validate.sh's own 77).
set -uo pipefail

(($# == 2)) || { echo "usage: $0 VALIDATE_SH BUILD_DIR" >&2; exit 2; }
VAL=$(realpath "$1")
BUILD=$(realpath "$2")
command -v ip >/dev/null || { echo "SKIP: 'ip' not found (Debian package iproute2)"; exit 77; }

WORK=$(mktemp -d /tmp/fourfold-validate-test.XXXXXX)
export FOURFOLD_CLUSTER_DIR=$WORK/state FOURFOLD_CLUSTER_PREFIX=ffvt$$
trap 'rm -rf -- "$WORK"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
step() { echo "--- $*"; }
no_cluster() {
  local left
  left=$(ip netns list | awk '{print $1}' | grep "^$FOURFOLD_CLUSTER_PREFIX-" || true)
  [[ -z $left ]] || fail "$1: namespaces left: $left"
  [[ ! -e $FOURFOLD_CLUSTER_DIR ]] || fail "$1: state directory left"
}

export BUILD MAX_CONFIGS=3 REPEATS=1 STEPS=3
export MEASURE_FLAGS="--quick --min-bytes 64K --max-bytes 1M --repeats 1 --engine-steps 0 --no-nonblocking"

step "validate.sh OUT_DIR, from another directory, OUT_DIR relative to it"
cd "$WORK" || exit 1
rc=0
"$VAL" out >"$WORK/out.txt" 2>"$WORK/err.txt" || rc=$?
if ((rc == 77)); then
  echo "SKIP: $(grep -m1 'cannot emulate' "$WORK/err.txt" || tail -1 "$WORK/err.txt")"
  exit 77
fi
((rc == 0)) || { cat "$WORK/err.txt" >&2; fail "validate.sh exited $rc"; }
grep -q '^validate.sh: taking the cluster down' "$WORK/err.txt" || fail "no word of taking the cluster down"
no_cluster "after a run"
grep -q '^Device: paced, 2 GFLOP/s, 0.5 GB/s, MPI waits poll every 50 us' "$WORK/out.txt" || fail "the table lacks the device"
cmp -s "$WORK/out.txt" "$WORK/out/report.txt" || fail "report.txt is not the table printed"
python3 - "$WORK/out" <<'PY' || fail "profile or report"
import json, os, sys
d = sys.argv[1]
p = json.load(open(os.path.join(d, "profile.json")))
assert p["poll_us"] == 50 and p["raw"]["poll_us"] == 50 and p["gpus_per_node"] == 2, p.get("poll_us")
assert p["raw"]["nodes"] == 4 and p["raw"]["ranks"] == 8
r = json.load(open(os.path.join(d, "report.json")))
assert r["device"] == {"name": "paced", "pace": {"gemm_gflops": 2, "gbps": 0.5, "poll_us": 50, "host_gbps": 0.1}}, r["device"]
assert r["job"]["ranks"] == 8 and r["job"]["batch_sequences"] == 16 and r["job"]["model"]["name"] == "gpt-comm"
assert len(r["runs"]) == 3 and all(x["status"] == "ok" for x in r["runs"]), [x.get("error") for x in r["runs"]]
for x in r["runs"]:
    for rep in x["repeats"]:
        assert "emulate.sh mpirun " in rep["command"] and " --device paced --pace-gflops 2" in rep["command"], rep["command"]
assert r["machine_profile"]["paced_device"]["poll_us"] == 50
assert os.path.getsize(os.path.join(d, "report.svg")) > 0 and os.path.getsize(os.path.join(d, "measurement.json")) > 0
PY

step "again, 5 configurations, interrupted: profile reused, report resumed, exit 130, cluster down"
# Job control: the job gets a process group of its own that takes SIGINT (a
# background job of a plain script ignores it), as a terminal's Ctrl-C reaches it.
set -m
MAX_CONFIGS=5 "$VAL" out >/dev/null 2>"$WORK/err2.txt" &
pid=$!
set +m
for _ in $(seq 600); do grep -q '^\[pass 1/1, [45]/5\]' "$WORK/err2.txt" && break; kill -0 $pid 2>/dev/null || break; sleep 0.1; done
grep -q 'measure: reusing .*/out/profile.json (poll_us 50' "$WORK/err2.txt" || { cat "$WORK/err2.txt" >&2; fail "the profile was not reused"; }
grep -q 'validate: resuming .*/out/report.json' "$WORK/err2.txt" || fail "the report was not resumed"
kill -INT -- -$pid 2>/dev/null
rc=0
wait $pid || rc=$?
echo "interrupted: exit $rc, $(grep -c '^\[pass' "$WORK/err2.txt") new runs started"
((rc == 130 || rc == 0)) || { cat "$WORK/err2.txt" >&2; fail "interrupted validate.sh exited $rc, expected 130"; }
grep -q '^validate.sh: taking the cluster down' "$WORK/err2.txt" || fail "no word of taking the cluster down after Ctrl-C"
no_cluster "after an interrupt"
python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); assert len(r["runs"]) >= 3, len(r["runs"])' "$WORK/out/report.json" ||
  fail "the interrupted report lost runs"

step "again on links capped by tbf: the htb profile is refused, exit 1, cluster down"
rc=0
FOURFOLD_CLUSTER_QDISC=tbf "$VAL" out >/dev/null 2>"$WORK/err3.txt" || rc=$?
((rc == 1)) || { cat "$WORK/err3.txt" >&2; fail "validate.sh on other links exited $rc, expected 1"; }
grep -q 'profile.json was measured on 4 nodes x 2 ranks, 200mbit per node link, tc htb, this validation runs on .* tc tbf; REMEASURE=1' \
  "$WORK/err3.txt" || { cat "$WORK/err3.txt" >&2; fail "no word of the profile's other links"; }
no_cluster "after a refused profile"
echo "PASS"
