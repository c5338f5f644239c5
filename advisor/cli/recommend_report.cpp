#include "advisor/cli/recommend_report.hpp"

#include <cmath>

#include "advisor/output/format.hpp"
#include "advisor/output/launch.hpp"

namespace ff::advisor {

nlohmann::json range_json(const MachineProfile& m, const PredictedRange& r) {
  return {{"low_s", r.low},
          {"high_s", r.high},
          {"stated", r.stated},
          {"beyond_checked_nodes", r.beyond_checked},
          {"basis", range_basis(m)}};
}

double train_tokens(const Job& job, double tokens) { return tokens > 0 ? tokens : 20 * parameter_count(job.model); }

nlohmann::json recommend_json(const Job& job, const JobOptions& o, const MachineProfile& m, const SearchResult& r,
                              const std::vector<Confidence>& conf, const std::vector<PredictedRange>& ranges,
                              double tokens, bool show_infeasible) {
  nlohmann::json out = {{"model", job.model.name},  {"machine", m.name},
                        {"gpus", job.gpus},         {"batch_sequences", job.batch},
                        {"seq_len", job.model.seq_len}, {"dtype", dtype_name(job.dtype)},
                        {"fusion", fusion_name(job.fusion)},
                        {"collective_form", collective_form_name(m.collectives)},
                        {"grad_dtype", dtype_name(job.grad_dtype)},
                        {"stage_messages", job.blocking_messages ? "blocking" : "overlapped"},
                        {"evaluated", r.evaluated}, {"feasible", r.feasible},
                        {"search_seconds", r.seconds}, {"search_threads", r.threads},
                        {"parameters", parameter_count(job.model)},
                        {"train_tokens", tokens}};
  out["configs"] = nlohmann::json::array();
  for (size_t i = 0; i < r.top.size(); ++i) {
    const Ranked& x = r.top[i];
    nlohmann::json c = to_json(x.config);
    c["equivalent_orders"] = x.equivalent_orders;
    c["time_s"] = x.estimate.time_s;
    c["compute_s"] = x.estimate.compute_s;
    c["exposed_comm_s"] = per_axis_json(x.estimate.exposed_comm_s);
    c["comm_s"] = per_axis_json(x.estimate.comm_s);
    c["pipeline_idle_s"] = x.estimate.bubble_s;
    c["host_link_s"] = x.estimate.host_s;
    c["sync_s"] = x.estimate.sync_s;
    c["memory_gib"] = x.memory.total() / 1073741824.0;
    c["mfu"] = x.estimate.mfu;
    c["hfu"] = x.estimate.hfu;
    c["tokens_per_s"] = x.estimate.tokens_per_s;
    c["days"] = tokens / x.estimate.tokens_per_s / 86400;
    nlohmann::json under = nlohmann::json::object();
    for (size_t k = 0; k < perturbations().size(); ++k) under[perturbations()[k].name()] = conf[i].rank_under[k];
    c["confidence"] = {{"margin", conf[i].margin}, {"stable", conf[i].stable}, {"rank_under", under}};
    c["range"] = range_json(m, ranges[i]);
    c["launch"] = launch_json(launch_lines(job, o.model, m, x.config, std::max(0, o.seq_len)));
    out["configs"].push_back(c);
  }
  if (show_infeasible) {
    out["rejected"] = nlohmann::json::array();
    for (const auto& x : r.rejected)
      out["rejected"].push_back({{"grid", x.grid.str()}, {"pipeline", x.grid.p}, {"micro_batch", x.micro_batch},
                                 {"recompute", recompute_name(x.recompute)}, {"reason", x.reason}});
  }
  return out;
}

NoAnswer no_answer(const Job& job, const MachineProfile& m, const SearchResult& r, bool show_infeasible) {
  if (r.grids_divisible == 0) {
    std::string why;
    for (const auto& s : r.split_reasons) why += "\n  " + s;
    return {false, "no grid of " + grouped(job.gpus) + " GPUs can split " + job.model.name + " with batch " +
                       grouped(job.batch) + " sequences (" + grouped(r.grids_total) + " grids tried):" + why +
                       "\n  try a batch with more small factors (e.g. a power of two) or another GPU count"};
  }
  double state_bytes = (low_precision(job.dtype) ? 18.0 : 16.0) * parameter_count(job.model);
  double usable = m.hbm_capacity - m.memory_reserve;
  // In doubles: an absurd model needs more GPUs than a long long counts.
  double need = std::ceil(std::ceil(state_bytes / usable) / m.gpus_per_node) * m.gpus_per_node;
  std::string msg = "no configuration of " + job.model.name + " on " + grouped(job.gpus) + " GPUs fits in " +
                    gib(m.hbm_capacity) + " GiB per GPU: the smallest footprint is " + gib(r.smallest_footprint) +
                    " GiB (grid " + r.smallest_config.grid.label() + ", micro-batch " +
                    std::to_string(r.smallest_config.micro_batch) +
                    (r.smallest_config.recompute != Recompute::None
                         ? std::string(", ") + recompute_name(r.smallest_config.recompute) + " recompute"
                         : "") +
                    ").";
  msg += "\n  weights and optimizer state alone take " + gib(state_bytes) + " GiB; at " + gib(usable) +
         " GiB usable per GPU that needs at least " +
         (need < 1e15 ? grouped((long long)need) : si(need, "")) + " GPUs";
  if (r.smallest_config.micro_batch > 1) msg += "\n  or allow micro-batch 1 (--micro-batch 1)";
  if (r.smallest_config.recompute != Recompute::Full) msg += "\n  or allow full recompute (--recompute full)";
  if (!show_infeasible) msg += "\n  (--show-infeasible lists what was tried)";
  return {true, msg};
}

}  // namespace ff::advisor
