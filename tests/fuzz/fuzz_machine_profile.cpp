// The machine-profile loader as `advisor recommend --machine FILE` uses it:
// a refused profile exits 2 with a message; an accepted one ranks a fixed
// job with every time a number >= 0, each configuration's time > 0. The job
// is small (examples/models/gpt-small.json on 8 GPUs, batch 16: 1,820
// configurations), so it fits most machines and the search stays quick.
#include "tests/fuzz/fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = fuzz::scratch("profile.json"), model = [] {
    std::string m = fuzz::scratch("gpt-small.json");
    std::string spec = R"({"name": "gpt-small", "layers": 4, "hidden": 512, "heads": 8, "ffn": 2048,
                           "vocab": 256, "padded_vocab": 256, "seq_len": 256})";
    fuzz::write_file(m, reinterpret_cast<const uint8_t*>(spec.data()), spec.size());
    return m;
  }();
  fuzz::write_file(path, data, size);
  fuzz::CliRun r = fuzz::advisor({"recommend", "--machine", path, "--model", model, "--gpus", "8", "--batch", "16",
                                  "--top", "3", "--json"});
  if (r.code == 0) fuzz::check_json_output(r, "recommend --json", true, {"time_s", "tokens_per_s"});
  return 0;
}
