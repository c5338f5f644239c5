#pragma once
// The engine's command line, defined once. The engine parses it with
// add_engine_options; the advisor's launch lines and `validate` spell it with
// engine_argv. A flag therefore cannot drift between the three, and a
// round-trip test (argv → parse → the same struct) holds them together.
#include <cstdint>
#include <string>
#include <vector>

#include "advisor/core/config.hpp"
#include "advisor/core/device_pace.hpp"
#include "advisor/core/option_groups.hpp"

namespace CLI {
class App;
}

namespace ff {

// The engine's defaults, which its run options (engine/train.hpp,
// engine/gpt.hpp's BucketSizes) take too: spelled once.
inline constexpr double kDefaultDpBucketMiB = 25;            // ODP's buckets (the profile's overlap.dp_bucket_MiB)
inline constexpr long kDefaultOffloadBucket = 4L << 20;      // offload: optimizer bucket, elements (MODEL.md §9's 4 Mi)
inline constexpr int kDefaultOffloadChunk = 4;               // offload: buckets per all-reduce chunk
inline constexpr uint64_t kDefaultSeed = 1234;

// The configuration and pace groups (option_groups.hpp) are the engine's
// flags as they are predict's and validate's.
struct EngineArgs : ConfigFlags, PaceFlags {
  std::string model = "examples/models/gpt-tiny.json";
  int seq_len = 0;  // 0: the model's
  std::vector<int> stage_layers;  // each stage's blocks, pinned; empty: stage_blocks' own
  double dp_bucket_mib = kDefaultDpBucketMiB;
  long offload_bucket = kDefaultOffloadBucket;
  int offload_chunk = kDefaultOffloadChunk;
  double clip = 1.0;               // gradient clipping by global norm; 0: none
  std::string device = "cpu";  // the backend the engine computes on
  std::string dtype = "fp32";
  // The gradient accumulators' and per-step reductions' dtype (MODEL.md §13
  // "Gradient dtype"): fp32 or the training dtype; empty: fp32, fp64 in fp64.
  std::string grad_dtype;
  long batch = 0;  // 0: one micro-step, micro_batch·G_z·G_data sequences
  int steps = 10;
  std::string data = "synthetic";
  std::string record;
  std::string trace_comm;  // every rank's communication events (JSON), written by rank 0
  double lr = 1e-3;
  uint64_t seed = kDefaultSeed;
  bool bench = false;
  bool profile_kernels = false;  // cuda: every kernel timed, the time per kernel class in the record
  bool quiet = false;
  bool operator==(const EngineArgs&) const = default;
};

// The engine's devices and the scalar types each computes in: fp32, bf16
// (fp32 masters; on the cpu and paced devices computed in fp32 from bf16
// values, rounded where they are stored) and fp64 (exactness checks). No
// fp16 yet.
const std::vector<std::string>& engine_devices();
bool engine_device_computes(const std::string& device, const std::string& dtype);

// Configuration `c` of a job, as the engine runs it on a device it has. An
// fp16 configuration runs in fp32 (same grid, placement and collectives,
// 4-byte values); `note` says so, else it is empty.
// `grad` is the job's gradient dtype: the line names it where it is not fp32.
EngineArgs engine_args(const std::string& model_arg, const Config& c, long batch, std::string* note = nullptr,
                       const std::string& device = "cpu", Dtype grad = Dtype::FP32);

// The gradient dtype `a` runs with: its --grad-dtype, or the default (fp32;
// fp64 in fp64). config_of has checked it.
std::string engine_grad_dtype(const EngineArgs& a);

// The configuration `a` runs: engine_args' inverse (Config → argv → Config
// is the identity on what the engine computes in). Checks every flag the
// engine takes, in one place; throws InputError naming the flag.
Config config_of(const EngineArgs& a);

// The flags of `a`, without the program name: every configuration flag, and
// the others only where they differ from the defaults.
std::vector<std::string> engine_argv(const EngineArgs& a);
std::string join_args(const std::vector<std::string>& argv);

// Binds every flag to `a` (the engine's parser).
void add_engine_options(CLI::App& app, EngineArgs& a);

}  // namespace ff
