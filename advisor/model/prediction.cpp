#include "advisor/model/prediction.hpp"

#include "advisor/core/error.hpp"

namespace ff {

namespace {

Job job_in_dtype(const Job& job_in, const Config& c) {
  Job job = job_in;
  job.dtype = c.dtype;
  return job;
}

// The estimate and what it is made of: the part of predict() a refit needs.
// `job` carries the configuration's dtype.
Estimate estimate_into(const Job& job, const MachineProfile& p, const Config& c, Prediction& pr, StagedTimes& st) {
  if (c.grid.total() != job.gpus)
    input_error("grid " + c.grid.label() + " has " + std::to_string(c.grid.total()) + " ranks, not the job's " +
                std::to_string(job.gpus));
  if (std::string why = optimizer_state_problem(p, {c.offload, c.shard_optimizer}); !why.empty()) input_error(why);
  if (std::string why = split_problem(job, c.grid, c.micro_batch); !why.empty())
    input_error("grid " + c.grid.label() + " with micro-batch " + std::to_string(c.micro_batch) + " cannot split " +
                job.model.name + ": " + why);
  if (c.sequence_parallel)
    if (std::string why = sequence_parallel_problem(job.model, c.grid, c.micro_batch); !why.empty()) input_error(why);
  if (std::string why = virtual_stages_problem(job, c.grid, c.micro_batch, c.virtual_stages); !why.empty())
    input_error(why);
  if (c.overlap.otp && !c.sequence_parallel)
    input_error("--overlap otp pipelines sequence parallelism's collectives over Y with their GEMMs: add "
                "--sequence-parallel (Megatron's --tp-comm-overlap needs it too)");
  if (c.overlap.otp && job.fusion != Fusion::Fused)
    input_error(std::string("--overlap otp is Transformer Engine's: it comes with the fused kernels, not --fusion ") +
                fusion_name(job.fusion));
  pr.config = c;
  const double tokens = double(job.batch) * job.model.seq_len;
  make_staged_plan(job, p, c.grid, c.micro_batch, c.recompute, pr.staged, c.sequence_parallel, c.virtual_stages);
  pr.links = placement_links(p, c.grid, c.order);
  if (c.overlap.otp && pr.links[static_cast<int>(Axis::Y)].across)
    input_error("--overlap otp: Transformer Engine's userbuffers need the tensor-parallel (Y) groups inside a node; "
                "order " + c.order.str() + " places them across nodes");
  pr.pairs = pair_link(p, c.grid.total(), axis_stride(c.grid, c.order, Axis::P), c.grid.p);
  staged_term_times(pr.staged, pr.links, pr.pairs, st);
  pr.message_s = st.message_s;
  pr.estimate = combine_staged(pr.staged, st, c.overlap, {c.offload, c.shard_optimizer}, tokens, &pr.per_kind, &pr.schedule);
  return pr.estimate;
}

}  // namespace

Estimate predict_estimate(const Job& job, const MachineProfile& p, const Config& c) {
  Prediction pr;
  StagedTimes st;
  return estimate_into(job_in_dtype(job, c), p, c, pr, st);
}

Prediction predict(const Job& job_in, const MachineProfile& p, const Config& c) {
  const Job job = job_in_dtype(job_in, c);
  Prediction pr;
  StagedTimes st;
  estimate_into(job, p, c, pr, st);
  const double tokens = double(job.batch) * job.model.seq_len;
  pr.static_order = c.grid.x * c.grid.y * c.grid.z > 1 || c.virtual_stages > 1;  // interleaving is static
  if (c.grid.p > 1) {
    // Blocking sends run inside their stage's operations (MODEL.md §9).
    const bool blocking = pr.staged.blocking_messages;
    std::vector<StageTime> stages = stage_times(pr.staged, pr.per_kind);
    if (blocking) stages = with_blocking_sends(stages, pr.message_s, c.virtual_stages);
    const double t = blocking ? 0.0 : pr.message_s;
    pr.simulated = c.virtual_stages > 1
                       ? simulate_interleaved(stages, pr.staged.plan[0].micro_steps, t, c.virtual_stages)
                       : simulate_schedule(stages, pr.staged.plan[0].micro_steps, t, pr.static_order);
  }
  // The critical stage's terms, for the per-term table.
  const int P = c.grid.p;
  const int k = pr.staged.kinds.kind_of(pr.schedule.critical_stage);
  pr.plan = pr.staged.plan[k];
  pr.term_seconds = st.times[k];
  pr.term_hidden.resize(pr.plan.comm.size());
  combine(pr.plan, pr.term_seconds.data(), c.overlap, tokens, pr.term_hidden.data());
  const OptimizerState os{c.offload, c.shard_optimizer};
  pr.memory = memory_use(job, p, c.grid, c.micro_batch, c.recompute, c.overlap, os, c.sequence_parallel, nullptr,
                         c.virtual_stages);
  if (P > 1)
    pr.stage_memory = memory_by_stage(job, p, c.grid, c.micro_batch, c.recompute, c.overlap, os, c.sequence_parallel,
                                      c.virtual_stages);
  pr.host_copy_s = st.host_copy_s[k];
  pr.dp_buckets = st.dp_buckets[k];
  pr.dp_bucket_s = c.shard_optimizer ? st.dp_rs_bucket_s[k] : st.dp_bucket_s[k];
  return pr;
}

}  // namespace ff
