#!/usr/bin/env bash
# The unit tests, the CLI test and one short multi-rank engine run
# (engine-short) built with AddressSanitizer and UndefinedBehaviorSanitizer
# (sanitizer_build.sh). Only the targets those tests need are built. A
# sanitizer report anywhere (also in a process whose exit code a test does
# not look at, or an MPI rank) fails the step: reports go to files under
# BUILD_DIR/sanitizer-reports, printed at the end. Leaks inside Open MPI are
# suppressed (lsan.supp says which and why), no others.
# Usage: tests/ci/sanitize.sh [BUILD_DIR]   (default: build-asan at the root)
# Leaves BUILD_DIR/meson-logs/testlog.json for the caller to count.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
dir=${1:-$root/build-asan}
reports=$dir/sanitizer-reports
source "$root/tests/ci/sanitizer_build.sh"

t0=$SECONDS
rm -f "$dir/meson-logs/testlog.json"
sanitizer_build "$dir" "$root" || exit 1
ninja -C "$dir" tests/unit_tests advisor/advisor engine/engine || exit 1
echo "sanitize: build $((SECONDS - t0)) s"

t1=$SECONDS
rm -rf "$reports"
mkdir -p "$reports"
# exitcode 86: a report never passes for an expected exit (0, 1, 2, 3).
export ASAN_OPTIONS="detect_leaks=1:exitcode=86:log_path=$reports/report:strict_string_checks=1:detect_stack_use_after_return=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:exitcode=86:log_path=$reports/report"
export LSAN_OPTIONS="suppressions=$root/tests/ci/lsan.supp:print_suppressions=0"
export FF_SANITIZED=1  # cli_test.sh leaves out its two largest searches
meson test -C "$dir" --no-rebuild --print-errorlogs --timeout-multiplier 5 --suite unit --suite cli --suite sanitize
rc=$?
echo "sanitize: tests $((SECONDS - t1)) s"

if compgen -G "$reports/*" >/dev/null; then
  echo "sanitize: reports:"
  for f in "$reports"/*; do
    echo "--- $f"
    cat "$f"
  done
  exit 1
fi
exit $rc
