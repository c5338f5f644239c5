#pragma once
// The options every job-shaped subcommand shares, spelled as MODEL.md §3 says.
#include <CLI/CLI.hpp>

#include "advisor/model/cost_model.hpp"

namespace ff::advisor {

// The job group's heading in --help (recommend, predict, bench).
inline constexpr const char* kJobGroup = "Job";

struct JobOptions {
  std::string model = "gpt-80b";
  std::string gpus;  // parsed by hand: "1.5" and "-4" deserve our message, not a conversion error
  std::string machine;
  long long batch = -1;        // sequences; -1: not given (from batch_tokens or the default)
  long long batch_tokens = -1; // -1: not given
  std::string dtype;  // empty: bf16, or fp16 on a machine without bf16
  std::string fusion = "fused";
  std::string collectives = "ring";
  std::string grad_dtype = "fp32";
  int seq_len = -1;  // -1: not given, the model's (a config.json's max_position_embeddings)
  std::vector<int> stage_layers;  // --stage-layers: each stage's blocks, pinned
  std::string stage_messages = "overlapped";  // or "blocking" (MODEL.md §9)
};

// Default global batch: 4 Mi tokens (2,048 sequences of 2,048), the scale of
// GPT-3 and LLaMA training batches; beyond 4,096 GPUs, half a sequence per
// GPU, as weak-scaling runs grow the batch with the machine.
inline constexpr long long kDefaultBatchTokens = 4LL << 20;

void add_job_options(CLI::App* app, JobOptions& o, bool gpus_required = true);

struct LoadedJob {
  Job job;
  MachineProfile machine;
};
// Loads the model and machine and checks the numbers; throws InputError.
LoadedJob load_job(const JobOptions& o);
long long parse_gpus(const std::string& text);
// --gpus for a sweep: "64..4096" (64 doubled up to 4,096), "64,128,512" (a
// list, increasing) or one count; throws InputError naming --gpus.
std::vector<long long> parse_gpu_counts(const std::string& text);
// --pipeline's stage counts: each >= 1, at most the layers and dividing the GPUs;
// throws InputError.
void check_pipelines(const Job& job, const std::vector<int>& stages);
// The model's answers to a configuration, in the flags' words; throw InputError.
void check_optimizer_state(const MachineProfile& m, OptimizerState os);  // --offload, --shard-optimizer
void check_grid_gpus(const Job& job, const Grid& g);                      // --grid against --gpus
long long default_batch(const ModelSpec& m, long long gpus);

// ", two-level collectives where faster (…)" for a title line where
// --collectives two-level was given, else "".
std::string collectives_words(const MachineProfile& m);

}  // namespace ff::advisor
