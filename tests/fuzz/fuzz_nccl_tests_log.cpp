// The nccl-tests log reader (text and -J JSON, told apart by the content) as
// `advisor calibrate --from-nccl-tests` uses it over a base profile (a log
// holds collectives only), with the group geometry read from the log and with
// a size given: a refused log exits 2 with a message; an accepted one gives a
// profile the advisor loads, and times >= 0.
#include "tests/fuzz/fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The name says all-reduce, for logs that do not name their binary.
  static const std::string path = fuzz::scratch("all_reduce_perf.log"), out = fuzz::scratch("fitted.json");
  fuzz::write_file(path, data, size);
  fuzz::CliRun r = fuzz::advisor({"calibrate", "--from-nccl-tests", path, "--gpus-per-node", "8", "--base", "dgx-h100", "-o", out,
                                  "--json"});
  if (r.code == 0) {
    fuzz::check_json_output(r, "calibrate --json");
    fuzz::check_profile_loads(out, "calibrate --from-nccl-tests");
  }
  // The table for people, on a size given.
  r = fuzz::advisor(
      {"calibrate", "--from-nccl-tests", path, "--gpus-per-node", "4", "--size", "2", "--base", "perlmutter", "-o", out});
  if (r.code == 0) fuzz::check_profile_loads(out, "calibrate --from-nccl-tests --size 2");
  return 0;
}
