#include "record.hpp"

namespace ff::engine {

nlohmann::json run_record(const RunOptions& o, const std::string& dtype, int ranks, const RunResult& r,
                          const Provenance& p) {
  nlohmann::json config = to_json(o.config);
  config["dtype"] = dtype;
  nlohmann::json steps = nlohmann::json::array();
  double gemm_s = 0, gemm_flops = 0, time_s = 0;
  for (const StepRecord& s : r.steps) {
    steps.push_back({{"step", s.step},
                     {"loss", s.loss},
                     {"grad_norm", s.grad_norm},
                     {"time_s", s.time_s},
                     {"compute_s", s.compute_s},
                     {"comm_s", per_axis_json(s.comm_s)},
                     {"sync_s", s.sync_s},
                     {"gemm_s", s.gemm_s},
                     {"gemm_flops", s.gemm_flops}});
    gemm_s += s.gemm_s, gemm_flops += s.gemm_flops, time_s += s.time_s;
  }
  const double tokens = double(o.batch) * o.model.seq_len * double(r.steps.size());
  return {{"config", config},
          {"model", o.model.name},
          {"model_spec", to_json(o.model)},
          {"ranks", ranks},
          {"batch_sequences", o.batch},
          {"micro_steps", r.micro_steps},
          {"data", o.data},
          {"optimizer", {{"name", "adamw"}, {"lr", o.opt.lr}, {"beta1", o.opt.beta1}, {"beta2", o.opt.beta2},
                         {"eps", o.opt.eps}, {"weight_decay", o.opt.weight_decay}, {"clip", o.opt.clip}}},
          {"steps", steps},
          {"bytes_per_step", per_axis_json(r.bytes_per_step)},
          {"peak_memory_bytes", r.peak_memory_bytes},
          {"final_loss", r.steps.empty() ? 0.0 : r.steps.back().loss},
          {"tokens_per_s", time_s > 0 ? tokens / time_s : 0.0},
          {"gemm", {{"seconds_per_rank", gemm_s}, {"flops_per_rank", gemm_flops},
                    {"flops_per_s", gemm_s > 0 ? gemm_flops / gemm_s : 0.0}}},
          // Hidden: time a non-blocking collective was in flight while this rank
          // computed (an upper bound: it includes waiting for peers to post).
          {"nonblocking", {{"inflight_s_per_step", r.inflight_s}, {"exposed_s_per_step", r.nonblocking_exposed_s},
                           {"hidden_s_per_step", r.inflight_s - r.nonblocking_exposed_s}}},
          {"provenance", {{"host", p.host}, {"mpi", p.mpi}, {"blas", p.blas}, {"git", p.git}, {"command", p.command}}}};
}

}  // namespace ff::engine
