# The build directory the sanitizer step (sanitize.sh) and the fuzz step
# (fuzz.sh) share, sourced by both: clang 14 with AddressSanitizer and
# UndefinedBehaviorSanitizer, and libFuzzer's coverage in every object
# (-fsanitize=fuzzer-no-link) so the fuzz targets (-Dfuzz=true) link against
# the same advisor the tests run. One build instead of two: under GCC 12,
# -fsanitize=address,undefined compiles the advisor 5x slower than a release
# build (clang: 2x), which a 2-core CI cannot afford twice.
# -O1 -gline-tables-only, as the sanitizers' documentation advises: -O1
# keeps the tests quick and compiles in less time than -O2, and line tables
# name the lines in a report without the rest of -g's debug information.
# b_lundef=false: the sanitizer runtimes resolve their symbols at load time.
# coverage_ignore.txt: sources left without the fuzzer's coverage (it says why).

# sanitizer_build DIR ROOT: configures DIR unless it is configured already.
sanitizer_build() {
  local dir=$1 root=$2
  [[ -f $dir/build.ninja ]] && return 0
  mkdir -p "$dir"
  CXX=${SANITIZER_CXX:-clang++-14} meson setup "$dir" "$root" -Dfuzz=true -Dcuda=disabled \
    -Db_sanitize=address,undefined -Db_lundef=false -Doptimization=1 -Ddebug=false \
    "-Dcpp_args=-gline-tables-only -fsanitize=fuzzer-no-link -fsanitize-coverage-ignorelist=$root/tests/ci/coverage_ignore.txt" \
    >"$dir/setup.log" 2>&1 || { cat "$dir/setup.log"; return 1; }
}
