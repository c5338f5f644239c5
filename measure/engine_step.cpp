#include "measure/engine_step.hpp"

#include <mpi.h>

#include "advisor/model/memory_model.hpp"
#include "engine/train.hpp"  // and engine's MPI_CHECK

namespace ff::measure {

std::string engine_step_problem(const ff::ModelSpec& model, int micro_batch, int steps, double memory_per_rank,
                                double gemm_flops_per_s) {
  ff::Job job{model, 1, micro_batch, ff::Dtype::FP32};
  // The memory model's figure for the replica, with no reserve (a default
  // profile's): half the rank's memory leaves room for measure's own buffers.
  double bytes = ff::memory_use(job, ff::MachineProfile{}, ff::Grid{}, micro_batch, ff::Recompute::None, ff::Overlap{}).total();
  if (memory_per_rank > 0 && bytes > 0.5 * memory_per_rank)
    return model.name + " needs about " + std::to_string(long(bytes / 1048576)) + " MiB per rank, more than half of " +
           std::to_string(long(memory_per_rank / 1048576)) + " MiB";
  double flops = ff::model_flops(model, double(micro_batch)) * steps;
  if (gemm_flops_per_s > 0 && flops / gemm_flops_per_s > 60)
    return std::to_string(steps) + " steps of " + model.name + " would take about " +
           std::to_string(long(flops / gemm_flops_per_s)) + " s per rank";
  return "";
}

ff::EngineStepSample measure_engine_step(const ff::ModelSpec& model, int micro_batch, int steps) {
  ff::engine::RunOptions ro;
  ro.model = model;
  ro.config = ff::Config{ff::Grid{}, ff::Order{}, micro_batch, ff::Recompute::None, ff::Overlap{}, ff::Dtype::FP32};
  ro.batch = micro_batch;
  ro.steps = steps;
  MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
  // A world barrier after every step keeps the replicas' steps together, so
  // each is timed while every rank computes, as in a training step.
  ff::engine::RunResult r = ff::engine::train<float>(MPI_COMM_SELF, ro, false, [](const ff::engine::StepRecord&) {
    MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
  });
  int ranks = 1;
  MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &ranks));
  std::vector<double> v;
  for (const auto& s : r.steps) v.insert(v.end(), {s.compute_s, s.gemm_s});
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, v.data(), int(v.size()), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
  ff::EngineStepSample out;
  out.model = model;
  out.micro_batch = micro_batch;
  for (size_t i = 0; i < r.steps.size(); ++i) {
    out.compute_s.push_back(v[2 * i] / ranks);
    out.gemm_s.push_back(v[2 * i + 1] / ranks);
  }
  return out;
}

}  // namespace ff::measure
