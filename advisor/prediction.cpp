#include "prediction.hpp"

#include "error.hpp"

namespace ff {

Prediction predict(const Job& job_in, const MachineProfile& p, const Config& c) {
  Job job = job_in;
  job.dtype = c.dtype;
  if (c.grid.total() != job.gpus)
    input_error("--grid " + c.grid.label() + " has " + std::to_string(c.grid.total()) + " ranks, not --gpus " +
                std::to_string(job.gpus));
  if (c.offload && !p.has_host)
    input_error("--offload: machine '" + p.name + "' gives no host link (host.link_GBps, host.memory_GiB); measure it or "
                "add the figures, or drop --offload");
  if (c.offload && c.shard_optimizer)
    input_error("--offload with --shard-optimizer: the pair (reduce-scatter, optimizer on the host, all-gather) is not "
                "priced yet; choose one");
  if (std::string why = split_problem(job, c.grid, c.micro_batch); !why.empty())
    input_error("grid " + c.grid.label() + " with micro-batch " + std::to_string(c.micro_batch) + " cannot split " +
                job.model.name + ": " + why);
  Prediction pr;
  pr.config = c;
  const double tokens = double(job.batch) * job.model.seq_len;
  make_staged_plan(job, p, c.grid, c.micro_batch, c.recompute, pr.staged);
  pr.links = placement_links(p, c.grid, c.order);
  pr.pairs = pair_link(p, c.grid.total(), axis_stride(c.grid, c.order, Axis::P), c.grid.p);
  StagedTimes st;
  staged_term_times(pr.staged, pr.links, pr.pairs, st);
  pr.message_s = st.message_s;
  pr.estimate = combine_staged(pr.staged, st, c.overlap, {c.offload, c.shard_optimizer}, tokens, &pr.per_kind, &pr.schedule);
  pr.static_order = c.grid.x * c.grid.y * c.grid.z > 1;
  if (c.grid.p > 1)
    pr.simulated = simulate_schedule(stage_times(pr.staged, pr.per_kind), pr.staged.plan[0].micro_steps, pr.message_s,
                                     pr.static_order);
  // The critical stage's terms, for the per-term table.
  const int P = c.grid.p, crit = pr.schedule.critical_stage;
  const int k = crit == 0 ? 0 : crit == P - 1 ? pr.staged.kinds.count - 1 : 1;
  pr.plan = pr.staged.plan[k];
  pr.term_seconds = st.times[k];
  pr.term_hidden.resize(pr.plan.comm.size());
  combine(pr.plan, pr.term_seconds.data(), c.overlap, tokens, pr.term_hidden.data());
  const OptimizerState os{c.offload, c.shard_optimizer};
  pr.memory = memory_use(job, p, c.grid, c.micro_batch, c.recompute, c.overlap, os);
  if (P > 1) pr.stage_memory = memory_by_stage(job, p, c.grid, c.micro_batch, c.recompute, c.overlap, os);
  pr.host_copy_s = st.host_copy_s[k];
  pr.dp_buckets = st.dp_buckets[k];
  pr.dp_bucket_s = c.shard_optimizer ? st.dp_rs_bucket_s[k] : st.dp_bucket_s[k];
  return pr;
}

}  // namespace ff
