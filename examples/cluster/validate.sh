#!/usr/bin/env bash
# validate.sh — the paced validation on the emulated cluster, in one command.
#
#   examples/cluster/validate.sh OUT_DIR
#   RATE=100mbit MAX_CONFIGS=60 examples/cluster/validate.sh /tmp/val
#
# What it does (advisor/README.md, "advisor validate, on an emulated cluster"):
#
#   1. emulate.sh up NODES RANKS_PER_NODE RATE (4 nodes x 2 ranks, 200mbit);
#   2. measure on it with --poll-us Δ, the Δ the paced engine will wait with
#      (MODEL.md §11: a sleeping rank makes no MPI progress, so Δ is part of what
#      a collective costs) and --gap-us GAP_US, writing the profile
#      OUT_DIR/profile.json (measure fits it itself; no separate `advisor
#      calibrate`);
#   3. advisor validate --device paced: gpt-comm on 8 ranks, batch 16, every
#      run's engine on the paced device, predictions priced with the pace in
#      place of the profile's compute, the communication part scored on its
#      own (comm_mape); MAX_CONFIGS >= 30 covers all 30 grid shapes of 8 ranks
#      the engine can lay gpt-comm out on (20 of one stage, 10 of two)
#      (the sample is round-robin over grid shapes);
#   4. emulate.sh down — always, also on an error or Ctrl-C.
#
# Output in OUT_DIR: profile.json and measurement.json (measure), measure.txt
# (its table), report.json, report.svg and report.txt (advisor validate),
# report.json.runs/ (each run's log and engine record). Progress on stderr;
# the validation's table also on stdout.
#
# Run again with the same OUT_DIR: an existing profile.json is reused (its
# poll_us and gap_us must be POLL_US and GAP_US, and the cluster the one
# OUT_DIR/links.txt names; REMEASURE=1 measures again) and an existing
# report.json is resumed (`advisor validate --resume`: only the missing runs).
#
# Relative paths: OUT_DIR from the current directory; BUILD from the
# repository root (found from this script's location, so it runs from any
# directory).
#
# Environment:
#   BUILD           the meson build directory                       [build]
#   RATE            each node's link, tc units (emulate.sh)         [200mbit]
#   NODES           emulated nodes                                  [4]
#   RANKS_PER_NODE  ranks per node; the job has NODES*RANKS_PER_NODE ranks [2]
#   SWITCH_GROUPS, GLOBAL_RATE
#                   a two-level fabric: SWITCH_GROUPS switch groups of NODES/SWITCH_GROUPS
#                   nodes joined by uplinks of GLOBAL_RATE (emulate.sh up
#                   --groups --global-rate; measure --nodes-per-group) [1, none]
#   MAX_CONFIGS     configurations validated                        [40]
#   REPEATS         runs of each configuration                      [2]
#   STEPS           training steps per run, the first discarded     [8]
#   POLL_US         Δ, µs between MPI_Test calls (measure and engine) [50]
#   GAP_US          measure --gap-us: idle µs before each timed operation,
#                   as the paced engine's follow device time (0: back to back) [2000]
#   PACE_GFLOPS     the paced device's GEMM rate, GFLOP/s           [2]
#   PACE_GBPS       its element-wise bandwidth, GB/s                [0.5]
#   MEASURE_FLAGS   measure's sweep [--max-bytes 2M --iters 5 --repeats 3]
#   REMEASURE       1: measure even where OUT_DIR/profile.json exists [0]
#   FOURFOLD_CLUSTER_QDISC
#                   how the links are capped (emulate.sh): htb or tbf [htb]
#   FOURFOLD_CLUSTER_DIR, FOURFOLD_CLUSTER_PREFIX
#                   the cluster's state directory and namespace prefix
#                   [a fresh directory under /tmp, ffval<pid>]: by default
#                   this script never touches a cluster someone else has up.
#
# Exit codes: 0 every run succeeded; 1 a step failed (or some runs of the
# engine failed: the report keeps them, run again to retry); 2 usage; 77 the
# cluster cannot be emulated here (emulate.sh's: not root, no iproute2);
# 130 interrupted (the report keeps every finished run).
#
# Needs: what emulate.sh needs (root, iproute2, util-linux, Open MPI), and a
# build with measure, engine and advisor (ninja -C build).

set -euo pipefail

readonly ME=${0##*/}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
readonly HERE
ROOT=$(cd "$HERE/../.." && pwd)
readonly ROOT
readonly EMU=$HERE/emulate.sh

say() { echo "$ME: $*" >&2; }
die() { say "$*"; exit 1; }
usage() {
  echo "usage: $ME OUT_DIR   (options in the environment: BUILD RATE MAX_CONFIGS REPEATS STEPS POLL_US ...;" \
       "see the header of $0)" >&2
  exit 2
}

(($# == 1)) || usage
[[ $1 != -h && $1 != --help ]] || { sed -n '2,/^$/p' "$0" | sed 's/^# \{0,1\}//'; exit 0; }

BUILD=${BUILD:-build}
[[ $BUILD == /* ]] || BUILD=$ROOT/$BUILD
RATE=${RATE:-200mbit}
NODES=${NODES:-4}
RANKS_PER_NODE=${RANKS_PER_NODE:-2}
SWITCH_GROUPS=${SWITCH_GROUPS:-1}
GLOBAL_RATE=${GLOBAL_RATE:-}
fabric=() measure_fabric=()
if ((SWITCH_GROUPS > 1)); then
  fabric=(--groups "$SWITCH_GROUPS" --global-rate "$GLOBAL_RATE")
  measure_fabric=(--nodes-per-group "$((NODES / SWITCH_GROUPS))")
fi
MAX_CONFIGS=${MAX_CONFIGS:-40}
REPEATS=${REPEATS:-2}
STEPS=${STEPS:-8}
POLL_US=${POLL_US:-50}
GAP_US=${GAP_US:-2000}
PACE_GFLOPS=${PACE_GFLOPS:-2}
PACE_GBPS=${PACE_GBPS:-0.5}
MEASURE_FLAGS=${MEASURE_FLAGS:---max-bytes 2M --iters 5 --repeats 3}
REMEASURE=${REMEASURE:-0}
readonly MODEL=examples/models/gpt-comm.json BATCH=16

for v in NODES RANKS_PER_NODE MAX_CONFIGS REPEATS STEPS; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || { say "$v=${!v}: expected a whole number >= 1"; usage; }
done
RANKS=$((NODES * RANKS_PER_NODE))

MEASURE=$BUILD/measure/measure
ADVISOR=$BUILD/advisor/advisor
ENGINE=$BUILD/engine/engine
for exe in "$MEASURE" "$ADVISOR" "$ENGINE"; do
  [[ -x $exe ]] || die "$exe not found: build first (meson setup build && ninja -C build), or set BUILD"
done

mkdir -p -- "$1" || die "cannot create OUT_DIR '$1'"
OUT=$(cd -- "$1" && pwd)
readonly OUT

# Our own cluster (state and namespace names), unless told otherwise: `down`
# on the way out then removes only what this script made.
if [[ -z ${FOURFOLD_CLUSTER_DIR:-} ]]; then
  STATE_PARENT=$(mktemp -d /tmp/fourfold-validate.XXXXXX)
  export FOURFOLD_CLUSTER_DIR=$STATE_PARENT/state
fi
export FOURFOLD_CLUSTER_PREFIX=${FOURFOLD_CLUSTER_PREFIX:-ffval$$}
export FOURFOLD_CLUSTER_QDISC=${FOURFOLD_CLUSTER_QDISC:-htb}
# What the profile's links were: a profile is reused only on the same cluster.
links="$NODES nodes x $RANKS_PER_NODE ranks, $RATE per node link, tc $FOURFOLD_CLUSTER_QDISC"
((SWITCH_GROUPS == 1)) || links+=", $SWITCH_GROUPS switch groups, $GLOBAL_RATE uplinks"
# As the README's commands: one BLAS thread per rank (8 ranks share the
# cores), and ranks that wait yield their core.
export OPENBLAS_NUM_THREADS=1 OMPI_MCA_mpi_yield_when_idle=1

# shellcheck disable=SC2317  # run by the EXIT trap
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  say "taking the cluster down"
  "$EMU" down >/dev/null 2>&1 || say "warning: '$EMU down' failed; run it by hand (FOURFOLD_CLUSTER_DIR=$FOURFOLD_CLUSTER_DIR FOURFOLD_CLUSTER_PREFIX=$FOURFOLD_CLUSTER_PREFIX)"
  [[ -z ${STATE_PARENT:-} ]] || rm -rf -- "$STATE_PARENT"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Relative paths below (the model, the launcher) are the repository's.
cd "$ROOT"
start=$SECONDS
elapsed() { local s=$((SECONDS - start)); printf '%dm%02ds' $((s / 60)) $((s % 60)); }

say "cluster: $links"
rc=0
"$EMU" up "$NODES" "$RANKS_PER_NODE" "$RATE" "${fabric[@]}" || rc=$?
if ((rc == 77)); then
  say "skipped: the cluster cannot be emulated here (see above)"
  exit 77
fi
((rc == 0)) || die "emulate.sh up failed (exit $rc)"

profile=$OUT/profile.json
if [[ -s $profile && $REMEASURE != 1 ]]; then
  [[ $(cat "$OUT/links.txt" 2>/dev/null) == "$links" ]] ||
    die "$profile was measured on $(cat "$OUT/links.txt" 2>/dev/null || echo 'a cluster it does not name'), this validation runs on $links; REMEASURE=1 to measure again"
  # Links timed another way than this validation asks are not its links.
  python3 - "$profile" "$POLL_US" "$GAP_US" <<'PY' || die "REMEASURE=1 to measure again"
import json, sys
try:
    p = json.load(open(sys.argv[1]))
except Exception as e:
    sys.exit(f"{sys.argv[1]}: not a readable profile ({e})")
for field, want, what in (("poll_us", sys.argv[2], "POLL_US"), ("gap_us", sys.argv[3], "GAP_US")):
    had = p.get(field, 0 if field == "gap_us" else None)  # no gap_us: measured back to back
    if had is None or float(had) != float(want):
        sys.exit(f"{sys.argv[1]} was measured with {field} {had}, this validation asks {want} ({what})")
PY
  say "measure: reusing $profile (poll_us $POLL_US, gap_us $GAP_US; REMEASURE=1 to measure again)"
else
  say "measure: the links with every MPI wait polling every $POLL_US us, as the paced engine waits," \
      "each operation after $GAP_US us idle ($(elapsed))"
  # Links only: the pace replaces the profile's compute, so GEMMs and the
  # host link would be timed for nothing (their sections come from
  # cpu-8x2core, unused).
  # shellcheck disable=SC2086  # MEASURE_FLAGS is a list of flags
  "$EMU" mpirun "$MEASURE" --backend mpi --poll-us "$POLL_US" --gap-us "$GAP_US" $MEASURE_FLAGS "${measure_fabric[@]}" \
      --skip-gemm --skip-host --base cpu-8x2core \
      --out "$profile" --raw "$OUT/measurement.json" >"$OUT/measure.txt" ||
    die "measure failed (exit $?); its table so far is in $OUT/measure.txt"
  echo "$links" >"$OUT/links.txt.tmp" && mv "$OUT/links.txt.tmp" "$OUT/links.txt"
  say "measure: wrote $profile ($(elapsed))"
fi

report=$OUT/report.json
resume=()
if [[ -e $report ]]; then
  resume=(--resume)
  say "validate: resuming $report (only the missing runs)"
fi
say "validate: --device paced ($PACE_GFLOPS GFLOP/s, $PACE_GBPS GB/s, poll $POLL_US us), up to $MAX_CONFIGS configurations x $REPEATS repeats of $STEPS steps ($(elapsed))"
rc=0
"$ADVISOR" validate --device paced --pace-gflops "$PACE_GFLOPS" --pace-gbps "$PACE_GBPS" --poll-us "$POLL_US" \
    --model "$MODEL" --ranks "$RANKS" --batch "$BATCH" --machine "$profile" \
    --launcher "$EMU mpirun" --engine "$ENGINE" \
    --steps "$STEPS" --repeats "$REPEATS" --max-configs "$MAX_CONFIGS" \
    --out "$report" --plot "$OUT/report.svg" "${resume[@]}" | tee "$OUT/report.txt" || rc=$?  # pipefail: the advisor's
((rc == 0)) || say "advisor validate exited $rc ($(elapsed)); the report keeps every finished run: $report"
((rc == 0)) && say "done in $(elapsed): $report, $OUT/report.svg, $OUT/report.txt"
exit "$rc"
