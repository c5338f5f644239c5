// The engine's run record as `advisor validate` reads it after a run: a
// refused record makes that repeat a failure with a message; an accepted one
// is summarized and scored with every time a number >= 0.
#include "tests/fuzz/fuzz_common.hpp"
#include "tests/fuzz/validate_hooks.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = fuzz::scratch("run.json");
  fuzz::write_file(path, data, size);
  fuzz::read_run_record(path);
  return 0;
}
