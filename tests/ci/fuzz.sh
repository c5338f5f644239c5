#!/usr/bin/env bash
# Every loader of a file a user gives (tests/fuzz) fuzzed with libFuzzer,
# with AddressSanitizer and UndefinedBehaviorSanitizer (sanitizer_build.sh,
# the build sanitize.sh uses too), for a bounded time each (FUZZ_SECONDS,
# default 8: with a target's start and its final leak check, 6 targets stay
# within 60 s).
# A crash, a sanitizer report, a hang (one input over 5 s), memory over
# 2 GiB or a finding of the target (fuzz_common.hpp) fails its target; the
# input that did it is copied to tests/fuzz/regressions/TARGET/, where the
# ordinary test suite replays it from then on (commit it with the fix).
# New corpus entries go to a scratch directory, not into the repository.
# Usage: tests/ci/fuzz.sh [BUILD_DIR]   (default: build-asan at the root)
# Writes BUILD_DIR/fuzz-testlog.json: one line per target, meson's format.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
dir=${1:-$root/build-asan}
seconds=${FUZZ_SECONDS:-8}
targets=(machine_profile model_spec nccl_tests_log measurement run_record validation_report)
log=$dir/fuzz-testlog.json
source "$root/tests/ci/sanitizer_build.sh"

result() {  # TARGET OK|FAIL
  printf '{"name": "fuzz-%s", "result": "%s"}\n' "$1" "$2" >>"$log"
}

t0=$SECONDS
mkdir -p "$dir"
rm -f "$log"
built=true
sanitizer_build "$dir" "$root" || built=false
if $built; then
  ninja -C "$dir" "${targets[@]/#/tests/fuzz/fuzz_}" || built=false
fi
echo "fuzz: build $((SECONDS - t0)) s"
if ! $built; then
  for t in "${targets[@]}"; do result "$t" FAIL; done
  exit 1
fi

t2=$SECONDS
export ASAN_OPTIONS="detect_leaks=1:strict_string_checks=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
failed=0
for t in "${targets[@]}"; do
  t1=$SECONDS
  fresh=$(mktemp -d)
  artifacts=$dir/fuzz-artifacts/$t
  rm -rf "$artifacts"
  mkdir -p "$artifacts"
  corpora=("$fresh" "$root/tests/fuzz/corpus/$t")
  [[ -d $root/tests/fuzz/regressions/$t ]] && corpora+=("$root/tests/fuzz/regressions/$t")
  "$dir/tests/fuzz/fuzz_$t" -max_total_time="$seconds" -timeout=5 -rss_limit_mb=2048 -print_final_stats=1 \
    -dict="$root/tests/fuzz/fuzz.dict" \
    -artifact_prefix="$artifacts/" "${corpora[@]}" >"$dir/fuzz-$t.log" 2>&1
  rc=$?
  rm -rf "$fresh"
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$dir/fuzz-$t.log" | grep -o '[0-9]*$')
  if [[ $rc -eq 0 ]] && ! compgen -G "$artifacts/*" >/dev/null; then
    echo "fuzz $t: ${runs:-?} inputs in $((SECONDS - t1)) s, ok"
    result "$t" OK
    continue
  fi
  failed=$((failed + 1))
  result "$t" FAIL
  echo "fuzz $t: FAILED (exit $rc) after ${runs:-?} inputs in $((SECONDS - t1)) s; the end of its log:"
  grep -v '^#[0-9]' "$dir/fuzz-$t.log" | tail -60
  mkdir -p "$root/tests/fuzz/regressions/$t"
  for a in "$artifacts"/*; do
    [[ -f $a ]] || continue
    cp "$a" "$root/tests/fuzz/regressions/$t/"
    echo "fuzz $t: kept $(basename "$a") in tests/fuzz/regressions/$t/"
  done
done
echo "fuzz: $((${#targets[@]} - failed)) of ${#targets[@]} targets passed, fuzzing $((SECONDS - t2)) s"
[[ $failed -eq 0 ]]
