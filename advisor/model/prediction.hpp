#pragma once
// Everything the model says about one configuration: what `advisor predict`
// shows, `validate` compares with a run, and the search's top picks carry.
#include <array>
#include <vector>

#include "advisor/model/pipeline_model.hpp"

namespace ff {

struct Prediction {
  Config config;
  Plan plan;  // the stage that sets the time (the whole model without stages)
  PerAxis<AxisLink> links;
  std::vector<double> term_seconds;  // of `plan`, per occurrence, blocking then non-blocking (term_times)
  std::vector<double> term_hidden;   // of `plan`, per occurrence
  Estimate estimate;
  MemoryUse memory;                  // the rank that needs the most
  // With stages (G_p > 1): each kind of stage, the schedule by its closed
  // form and event by event, the P axis' pairs and a message's time.
  StagedPlan staged;
  std::array<Estimate, kMaxStageKinds> per_kind{};
  Schedule schedule, simulated;
  bool static_order = true;          // the order the engine runs: static when a stage has tensor axes
  PairLink pairs;
  double message_s = 0;
  std::vector<MemoryUse> stage_memory;
  double host_copy_s = 0;            // offload: the critical stage's host-link copies each way per iteration
  double dp_buckets = 0, dp_bucket_s = 0;  // odp: the critical stage's gradient buckets, one's reduction
};
// Throws InputError when the grid cannot split the job.
Prediction predict(const Job& job, const MachineProfile& p, const Config& c);
// predict(...).estimate alone, without the memory, the simulated schedule and
// the per-term table: what a refit evaluates thousands of times.
Estimate predict_estimate(const Job& job, const MachineProfile& p, const Config& c);

}  // namespace ff
