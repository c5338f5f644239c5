// The validation report as its two readers take it: `advisor validate
// --resume` (kept runs, scores, placement, plot, table) and `advisor
// calibrate --from-runs` (the refit): a refused report exits 2 with a
// message; an accepted one gives times >= 0 and a fitted profile the advisor
// loads.
#include "tests/fuzz/fuzz_common.hpp"
#include "tests/fuzz/validate_hooks.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = fuzz::scratch("report.json"), out = fuzz::scratch("refit.json");
  fuzz::write_file(path, data, size);
  fuzz::resume_report(path);
  fuzz::CliRun r = fuzz::advisor({"calibrate", "--from-runs", path, "-o", out, "--json"});
  if (r.code == 0) {
    fuzz::check_json_output(r, "calibrate --from-runs --json");
    fuzz::check_profile_loads(out, "calibrate --from-runs");
  }
  return 0;
}
