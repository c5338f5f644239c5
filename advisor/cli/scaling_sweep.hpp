#pragma once
// The searches behind `advisor scaling` (MODEL.md §14): each count's job as
// the sweep moves the batch or the model, then recommend's search, its
// confidence and its range at that count (MODEL.md §8). `advisor bench` times it.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "advisor/cli/filter_options.hpp"
#include "advisor/cli/job_options.hpp"
#include "advisor/model/scaling.hpp"

namespace ff::advisor {

// Strong: one batch at every count. WeakBatch: the batch grows with the
// count. WeakModels: one model per count (--weak with a --model list).
enum class Sweep { Strong, WeakBatch, WeakModels };
const char* sweep_name(Sweep s);  // "strong", "weak", "weak-models"

struct SweepSpec {
  JobOptions job;  // --gpus a range or a list; --model a list for WeakModels
  FilterFlags filters;
  bool weak = false;
  double tokens = 0;  // 0: 20 per parameter of each count's model
  int threads = 0;
  bool progress = true;  // a line per count on stderr
};

// One count: its job, its answer (or why none), and the summary.
struct SweepCount {
  Job job;
  std::string machine;
  ScalingPoint point;
  nlohmann::json recommend;  // what recommend --top 1 --json prints at this count
  std::string why;           // when nothing fits or divides
  std::string range_basis;   // what the range is made of (range_basis)
  bool range_stated = false; // the profile states its errors
  Config config;
  Estimate estimate;
};

struct SweepResult {
  Sweep sweep = Sweep::Strong;
  std::vector<SweepCount> counts;
  double seconds = 0;  // wall time of the searches
};

// Throws InputError naming the flag for a bad sweep (the counts, the models
// against them, a batch the weak sweep cannot grow).
SweepResult run_sweep(const SweepSpec& spec);

}  // namespace ff::advisor
