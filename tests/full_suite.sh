#!/usr/bin/env bash
# The whole test suite, or a loud failure. Configures build/ (or reconfigures
# it: Meson keeps the answers of its first setup, so a build/ made before MPI,
# OpenBLAS and hwloc were installed would silently leave measure/ and engine/
# out) with every part required, runs `meson test`, and counts the results,
# failing if any part's suite ran no test.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
suites=unit,cli,measure,engine,cluster,validate

if [[ -f $build/meson-private/coredata.dat ]]; then
  meson setup --reconfigure "$build" -Dmpi=enabled -Dtests=true || exit 1
else
  meson setup "$build" -Dmpi=enabled -Dtests=true || exit 1
fi
meson test -C "$build" --print-errorlogs
status=$?
python3 tests/summary.py --expect "$suites" "$build/meson-logs/testlog.json" || status=1
exit $status
