#!/usr/bin/env bash
# validate.sh — the README's validation in one command: an emulated 4 × 2
# cluster (emulate.sh), its links measured the way paced ranks wait, and
# `advisor validate` over the configurations of one job with every rank on
# its own paced device (DESIGN §11). The cluster is always taken down.
#
#   examples/cluster/validate.sh OUT_DIR
#
# writes OUT_DIR/measure.json (the measurement), OUT_DIR/profile.json (the
# profile calibrated from it, links measured, compute from cpu-8x2core and
# replaced by the pace when priced), OUT_DIR/report.json and OUT_DIR/report.svg
# (advisor validate's report and plot), OUT_DIR/report.txt (its table), and
# OUT_DIR/report.json.runs/ (every run's log and record).
#
# Environment (defaults in brackets):
#   BUILD        the build directory, relative to the repository   [build]
#   RATE         each node's link, in tc's units                    [200mbit]
#   MODEL        the job's model                                    [examples/models/gpt-comm.json]
#   BATCH        sequences per step                                 [16]
#   MAX_CONFIGS  configurations (round-robin over the 20 grid shapes of 8 ranks) [40]
#   REPEATS      runs per configuration, in interleaved passes      [2]
#   STEPS        steps per run, the first discarded                 [6]
#   PACE_GFLOPS, PACE_GBPS, POLL_US   the paced device    [the engine's defaults]
#   MEASURE_ARGS extra arguments for measure                        []
#
# Exit codes: advisor validate's (0: every run ok; 1: some failed, all kept in
# the report); 77 where namespaces cannot be created (emulate.sh's); 2 usage.
set -euo pipefail

die() { echo "validate.sh: $*" >&2; exit 2; }
[[ $# -eq 1 ]] || die "usage: validate.sh OUT_DIR"
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$1"
out=$(cd "$1" && pwd)
cd "$root"

build=${BUILD:-build}
rate=${RATE:-200mbit}
model=${MODEL:-examples/models/gpt-comm.json}
batch=${BATCH:-16}
max_configs=${MAX_CONFIGS:-40}
repeats=${REPEATS:-2}
steps=${STEPS:-6}
pace=()
[[ -n ${PACE_GFLOPS:-} ]] && pace+=(--pace-gflops "$PACE_GFLOPS")
[[ -n ${PACE_GBPS:-} ]] && pace+=(--pace-gbps "$PACE_GBPS")
poll_us=${POLL_US:-50}
read -r -a measure_extra <<<"${MEASURE_ARGS:-}"

for bin in advisor/advisor measure/measure engine/engine; do
  [[ -x $build/$bin ]] || die "$build/$bin not found: build first (ninja -C $build)"
done
emulate=examples/cluster/emulate.sh
# One BLAS thread per rank, and ranks that yield the core while MPI waits.
export OPENBLAS_NUM_THREADS=1 OMPI_MCA_mpi_yield_when_idle=1

"$emulate" down >/dev/null 2>&1 || true
trap '"$emulate" down >/dev/null 2>&1 || true' EXIT
trap 'exit 130' INT TERM
rc=0
"$emulate" up 4 2 "$rate" || rc=$?
[[ $rc -eq 0 ]] || exit "$rc"

start=$(date +%s)
echo "validate.sh: measuring the links (4 nodes x 2 ranks at $rate, --poll-us $poll_us)" >&2
# Links only: the paced device replaces the profile's compute (GEMM and
# memory figures then come from the base, unused).
"$emulate" mpirun "$build/measure/measure" --backend mpi --max-bytes 2M --iters 5 --repeats 3 --poll-us "$poll_us" \
  --skip-gemm --skip-host --engine-steps 0 --base cpu-8x2core --name "emu-4x2-$rate-paced" \
  --raw "$out/measure.json" --out "$out/profile.json" "${measure_extra[@]}"
echo "validate.sh: measured in $(($(date +%s) - start)) s; validating" >&2

rc=0
"$build/advisor/advisor" validate --model "$model" --ranks 8 --batch "$batch" --machine "$out/profile.json" \
  --launcher "$emulate mpirun" --device paced "${pace[@]}" --poll-us "$poll_us" --steps "$steps" \
  --repeats "$repeats" --max-configs "$max_configs" --out "$out/report.json" --plot "$out/report.svg" \
  >"$out/report.txt" || rc=$?
cat "$out/report.txt"
echo "validate.sh: done in $(($(date +%s) - start)) s; report in $out" >&2
exit "$rc"
