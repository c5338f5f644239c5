// The measurement-record reader (what `measure --raw` writes, or a profile
// keeping one in "raw") as `advisor calibrate --from` uses it, alone and over
// a bundled base: a refused record exits 2 with a message; an accepted one
// gives a profile the advisor loads, and times >= 0.
#include "tests/fuzz/fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = fuzz::scratch("record.json"), out = fuzz::scratch("fitted.json");
  fuzz::write_file(path, data, size);
  fuzz::CliRun r = fuzz::advisor({"calibrate", "--from", path, "-o", out, "--json"});
  if (r.code == 0) {
    fuzz::check_json_output(r, "calibrate --json");
    fuzz::check_profile_loads(out, "calibrate --from");
  }
  // The table for people, over a base profile.
  r = fuzz::advisor({"calibrate", "--from", path, "--base", "dgx-h100", "-o", out});
  if (r.code == 0) fuzz::check_profile_loads(out, "calibrate --from --base dgx-h100");
  return 0;
}
