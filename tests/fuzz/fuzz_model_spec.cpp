// The model-file loader as `advisor recommend --model FILE` uses it: a
// refused file exits 2 with a message, a model nothing can fit exits 3; an
// accepted one is ranked on the default machine (8 GPUs, batch 16: the
// search stays quick) with every time a number >= 0, each configuration's
// time > 0.
#include "tests/fuzz/fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = fuzz::scratch("model.json");
  fuzz::write_file(path, data, size);
  fuzz::CliRun r = fuzz::advisor({"recommend", "--model", path, "--gpus", "8", "--batch", "16", "--top", "3", "--json"});
  if (r.code == 0) fuzz::check_json_output(r, "recommend --json", true, {"time_s", "tokens_per_s"});
  return 0;
}
