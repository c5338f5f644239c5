#include "advisor/cli/job_options.hpp"

#include <iostream>

#include "advisor/core/error.hpp"
#include "advisor/core/option_groups.hpp"
#include "advisor/output/format.hpp"

namespace ff::advisor {

void add_job_options(CLI::App* app, JobOptions& o, bool gpus_required) {
  auto group = [](CLI::Option* opt) { return opt->group(kJobGroup); };
  group(app->add_option("--model", o.model,
                        "A preset (see `advisor models`) or a model JSON file (scaling --weak: a list, one per GPU "
                        "count)")
            ->capture_default_str());
  auto* g = group(app->add_option(
      "--gpus", o.gpus, "Number of GPUs (ranks) the job runs on (scaling: a doubling range 64..4096 or a list 64,128,512)"));
  if (gpus_required) g->required();
  group(app->add_option("--machine", o.machine,
                        std::string("A bundled machine (see `advisor machines`) or a profile JSON file [") +
                            default_machine() + "]"));
  auto* b = group(
      app->add_option("--batch", o.batch, "Global batch in sequences per iteration [max(4 Mi tokens, GPUs/2 sequences)]"));
  group(app->add_option("--batch-tokens", o.batch_tokens, "Global batch in tokens (a multiple of the sequence length)")
            ->excludes(b));
  group(app->add_option("--dtype", o.dtype,
                        "Training precision: bf16, fp16 (V100 and older) or fp32 [bf16, or fp16 where the machine has no bf16]"));
  group(app->add_option("--seq-len", o.seq_len,
                        "Tokens per sequence, in place of the model's (a Hugging Face config.json's "
                        "max_position_embeddings)"));
  group(app->add_option("--stage-layers", o.stage_layers,
                        "Each pipeline stage's blocks, first to last (e.g. 6,6,6,4), pinned; default: equal runs "
                        "where the stages divide the layers, else balanced with the LM head's stage lighter (MODEL.md §9)")
            ->delimiter(','));
  group(app->add_option("--grad-dtype", o.grad_dtype,
                        "The gradient accumulator and the data-parallel reduction: fp32, or the training dtype "
                        "(AxoNN's fp16; MODEL.md §13)")
            ->capture_default_str());
  group(app->add_option("--stage-messages", o.stage_messages,
                        "Pipeline stage messages: overlapped (posted, computed past: AxoNN, this engine) or blocking "
                        "(the sender waits: Megatron-LM's 1F1B, DeepSpeed; MODEL.md §9)")
            ->capture_default_str());
  group(app->add_option("--fusion", o.fusion,
                        "The framework's kernels (MODEL.md §2): fused (Megatron-LM with Transformer Engine), unfused "
                        "(PyTorch eager) or engine (this project's engine)")
            ->capture_default_str());
  group(app->add_option("--collectives", o.collectives,
                        "How groups spanning nodes run their collectives: ring (NCCL, RCCL), two-level (inside each "
                        "node, then one GPU a node across, where faster: the PCCL library's form) or pat (NCCL >= "
                        "2.23.4: PAT for the all-gathers and reduce-scatters of groups with one GPU a node, where "
                        "faster; MODEL.md §2)")
            ->capture_default_str());
}

long long default_batch(const ModelSpec& m, long long gpus) {
  return std::max({1LL, kDefaultBatchTokens / m.seq_len, gpus / 2});
}

long long parse_gpus(const std::string& text) {
  size_t used = 0;
  long long n = 0;
  try {
    n = std::stoll(text, &used);
  } catch (...) {
    used = 0;
  }
  if (used == 0 || used != text.size() || n < 1)
    input_error("--gpus '" + text + "': expected a whole number of GPUs >= 1");
  if (n > (1LL << 24)) input_error("--gpus " + text + ": more than 16,777,216 GPUs is not a machine anyone has");
  return n;
}

std::vector<long long> parse_gpu_counts(const std::string& text) {
  constexpr size_t kMaxCounts = 64;
  std::vector<long long> counts;
  if (size_t dots = text.find(".."); dots != std::string::npos) {
    const long long first = parse_gpus(text.substr(0, dots)), last = parse_gpus(text.substr(dots + 2));
    if (last < first) input_error("--gpus " + text + ": a range runs from fewer GPUs to more, e.g. 64..4096");
    for (long long n = first; n <= last; n *= 2) counts.push_back(n);
    if (counts.back() != last) {
      input_error("--gpus " + text + ": a range doubles from its start (" + grouped(first) + ", " + grouped(2 * first) +
                  ", …, " + grouped(counts.back()) + ", " + grouped(2 * counts.back()) +
                  "); end it on one of those, or list the counts (e.g. 64,96,128)");
    }
    return counts;
  }
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    counts.push_back(parse_gpus(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start)));
    if (counts.size() > 1 && counts.back() <= counts[counts.size() - 2])
      input_error("--gpus " + text + ": list the counts in increasing order, each once");
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (counts.size() > kMaxCounts)
    input_error("--gpus " + text + ": " + std::to_string(counts.size()) + " counts; at most " +
                std::to_string(kMaxCounts) + " in one sweep");
  return counts;
}

LoadedJob load_job(const JobOptions& o) {
  LoadedJob l;
  if (!o.dtype.empty()) l.job.dtype = flag_value("--dtype", [&] { return parse_dtype(o.dtype); });
  l.job.fusion = flag_value("--fusion", [&] {
    if (auto f = parse_fusion(o.fusion)) return *f;
    throw InputError("'" + o.fusion + "': expected fused, unfused or engine");
  });
  l.job.gpus = parse_gpus(o.gpus);
  if (o.stage_messages != "overlapped" && o.stage_messages != "blocking")
    input_error("--stage-messages '" + o.stage_messages + "': expected overlapped or blocking");
  l.job.blocking_messages = o.stage_messages == "blocking";
  if (o.seq_len == 0 || o.seq_len < -1) input_error("--seq-len " + std::to_string(o.seq_len) + ": expected tokens >= 1");
  std::vector<std::string> notes;
  l.job.model = load_model(o.model, &notes, std::max(0, o.seq_len));
  for (const std::string& n : notes) std::cerr << "note: " << n << "\n";
  if (!o.stage_layers.empty()) {
    const int P = int(o.stage_layers.size());
    if (std::string why = stage_layers_problem(l.job.model, P, o.stage_layers); !why.empty())
      input_error("--stage-layers: " + why);
    l.job.stage_layers = o.stage_layers;
  }
  l.machine = load_machine(o.machine.empty() ? default_machine() : o.machine);
  bool known = false;
  for (CollectiveForm f : {CollectiveForm::Ring, CollectiveForm::TwoLevel, CollectiveForm::Pat})
    if (o.collectives == collective_form_name(f)) l.machine.collectives = f, known = true;
  if (!known) input_error("--collectives '" + o.collectives + "': expected ring, two-level or pat");
  if (o.dtype.empty()) l.job.dtype = l.machine.peak_flops_bf16 > 0 ? Dtype::BF16 : Dtype::FP16;
  l.job.grad_dtype = flag_value("--grad-dtype", [&] { return parse_dtype(o.grad_dtype); });
  if (l.job.grad_dtype != Dtype::FP32 && l.job.grad_dtype != l.job.dtype)
    input_error("--grad-dtype " + o.grad_dtype + ": expected fp32 or the training dtype (" + dtype_name(l.job.dtype) +
                ")");
  if (l.machine.peak_flops(l.job.dtype) <= 0) {
    const char* d = dtype_name(l.job.dtype);
    input_error(std::string("--dtype ") + d + ": machine '" + l.machine.name + "' gives no " + d +
                " peak (compute.peak_tflops." + d + "); use " + (l.job.dtype == Dtype::FP16 ? "bf16" : "fp16") +
                " or fp32, or add the figure");
  }
  const int S = l.job.model.seq_len;
  if (o.batch == 0 || o.batch < -1)
    input_error("--batch " + std::to_string(o.batch) + ": expected a number of sequences >= 1");
  if (o.batch > 0) {
    l.job.batch = o.batch;
  } else if (o.batch_tokens != -1) {
    if (o.batch_tokens < S || o.batch_tokens % S)
      input_error("--batch-tokens " + std::to_string(o.batch_tokens) + ": expected a positive multiple of the sequence length " +
                  std::to_string(S));
    l.job.batch = o.batch_tokens / S;
  } else {
    l.job.batch = default_batch(l.job.model, l.job.gpus);
  }
  if (l.job.gpus > l.machine.gpus_per_node && l.job.gpus % l.machine.gpus_per_node)
    std::cerr << "advisor: note: " << l.job.gpus << " GPUs is not a whole number of " << l.machine.name
              << " nodes (" << l.machine.gpus_per_node << " GPUs each); the last node is priced as partly used\n";
  return l;
}

std::string collectives_words(const MachineProfile& m) {
  switch (m.collectives) {
    case CollectiveForm::TwoLevel:
      return ", two-level collectives where faster (PCCL's form; the launch lines run NCCL's rings)";
    case CollectiveForm::Pat:
      return ", PAT for one-GPU-a-node all-gathers and reduce-scatters where faster (NCCL >= 2.23.4; priced by "
             "NCCL's own cost model, not measured)";
    case CollectiveForm::Ring: break;
  }
  return "";
}

void check_optimizer_state(const MachineProfile& m, OptimizerState os) {
  const std::string why = optimizer_state_problem(m, os);
  if (why.empty()) return;
  if (os.sharded) input_error("--offload with --shard-optimizer: " + why + "; choose one");
  input_error("--offload: " + why + ", or drop --offload");
}

void check_grid_gpus(const Job& job, const Grid& g) {
  if (g.total() != job.gpus)
    input_error("--grid " + g.label() + " has " + std::to_string(g.total()) + " ranks, not --gpus " +
                std::to_string(job.gpus));
}

void check_pipelines(const Job& job, const std::vector<int>& stages) {
  for (int P : stages) {
    at_least("--pipeline", P, 1, "a number of stages");
    if (P > job.model.layers || job.gpus % P)
      input_error("--pipeline " + std::to_string(P) + ": stages must divide the " + grouped(job.gpus) +
                  " GPUs and hold at least one of the " + std::to_string(job.model.layers) + " layers each");
  }
}

}  // namespace ff::advisor
