#!/usr/bin/env bash
# SimGrid/SMPI second opinion on the advisor's collective prices
# (examples/simgrid/README.md; results in advisor/results/2026-11-27-simgrid-collectives.md).
#
#   examples/simgrid/run.sh [OUTDIR]        (default: examples/simgrid/out)
#
# 1. builds collective_bench with smpicxx and the operator-new[] preload;
# 2. runs the sweep on platforms/perlmutter-gpu.xml, ranks contiguous, 4 a node:
#    16, 64, 256 and 1,024 ranks (4-256 nodes), all-gather (NTSLR: SMPI's logical
#    ring) and reduce-scatter (ompi_ring), 1 MiB - 1 GiB;
#    then 256 ranks on 64 nodes split into 4 groups of 64 (one member a node):
#    one group active, then all 4 at once (they share every node's link);
#    two side runs at 64 ranks (README.md, "Side runs");
#    writes OUTDIR/sim.csv; progress and each run's times on stderr;
# 3. if the advisor is built (build/advisor/libfourfold_advisor.a, from
#    `meson setup build -Dtests=false && ninja -C build advisor/advisor`), builds
#    price.cpp against it and writes OUTDIR/compare.csv: each row with the
#    advisor's price for the same collective (profiles/perlmutter.json).
# Environment: RANKS="16 64 256 1024" to choose spans, SKIP_SIM=1 to only price.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${1:-$here/out}
mkdir -p "$out"
ranks_list=${RANKS:-"16 64 256 1024"}
sizes=1,4,16,64,256,1024
platform=$here/platforms/perlmutter-gpu.xml
log() { echo "[run.sh $(date +%H:%M:%S)] $*" >&2; }

# The simulation's settings (README.md, "Settings"): SimGrid's fluid max-min
# model without SMPI's calibration factors, no reverse (ACK) traffic, no
# simulated computation, the ring algorithms named.
cfg=(--cfg=network/model:CM02 --cfg=network/crosstraffic:0 --cfg=smpi/simulate-computation:no
     --cfg=smpi/allgather:NTSLR --cfg=smpi/reduce_scatter:ompi_ring
     --cfg=smpi/shared-malloc:global --cfg=contexts/stack-size:1024
     --log=root.thres:warning --log=smpi_bench.thres:error)

if [[ -z "${SKIP_SIM:-}" ]]; then
  log "building collective_bench and libffsim_new.so in $out"
  g++ -O2 -std=c++17 -shared -fPIC -o "$out/libffsim_new.so" "$here/shared_new.cpp" -ldl
  smpicxx -O2 -std=c++17 -o "$out/collective_bench" "$here/collective_bench.cpp"

  csv=$out/sim.csv
  echo "coll,ranks,nodes,groups,active,bytes,sim_s,variant" > "$csv"
  # one run: NAME RANKS(world) VARIANT BENCH-ARGS... (VARIANT: main, or a side
  # run's label; side runs take their settings from $extra)
  extra=()
  run() {
    local name=$1 world=$2 variant=$3; shift 3
    local nodes=$((world / 4)) hf=$out/hosts-$world
    : > "$hf"
    for ((n = 0; n < nodes; ++n)); do echo "nid$n:4" >> "$hf"; done
    log "$name: $world ranks on $nodes nodes $*"
    local t0=$SECONDS
    LD_PRELOAD=$out/libffsim_new.so /usr/bin/time -f "%e s wall, %U s user, %S s sys, %M KiB max RSS" \
      -o "$out/time-$name.txt" smpirun -np "$world" -platform "$platform" -hostfile "$hf" "${cfg[@]}" "${extra[@]}" \
      "$out/collective_bench" --sizes-mib "$sizes" "$@" > "$out/raw-$name.txt"
    grep '^RESULT' "$out/raw-$name.txt" | while IFS=, read -r _ coll g stride groups active bytes secs; do
      echo "$coll,$g,$nodes,$groups,$active,$bytes,$secs,$variant" >> "$csv"
    done
    log "$name done in $((SECONDS - t0)) s ($(cat "$out/time-$name.txt"))"
  }
  for w in $ranks_list; do run "contig-$w" "$w" main; done
  run strided-1of4 256 main --groups 4 --active 1
  run strided-4of4 256 main --groups 4 --active 4
  # Side runs at 64 ranks (16 nodes), all-gather only: what two settings
  # change. SMPI's own "ring" all-gather (a shift: step i sends to rank + i,
  # so every rank's flow leaves its node at once), and SMPI's default network
  # model (its piecewise lat/bw factors, calibrated on another cluster).
  extra=(--cfg=smpi/allgather:ring)
  run side-smpi-ring-64 64 "smpi allgather:ring" --colls ag
  extra=(--cfg=network/model:SMPI)
  run side-smpi-model-64 64 "network/model:SMPI" --colls ag
  extra=()
  log "wrote $csv"
fi

lib=$root/build/advisor/libfourfold_advisor.a
core=$root/build/advisor/libfourfold_core.a
if [[ -f $lib && -f $core ]]; then
  log "building price against $lib"
  g++ -O2 -std=c++20 -I"$root" -o "$out/price" "$here/price.cpp" "$lib" "$core" -lpthread
  "$out/price" "$root/profiles/perlmutter.json" < "$out/sim.csv" > "$out/compare.csv"
  log "wrote $out/compare.csv"
else
  log "advisor not built ($lib): skipping the comparison"
fi
