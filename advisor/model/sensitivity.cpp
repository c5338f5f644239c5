#include "advisor/model/sensitivity.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

namespace ff {

std::string Perturbation::name() const {
  const char* t = tier == Tier::Intra ? "intra" : tier == Tier::Inter ? "inter" : "gemm";
  return std::string(t) + (factor < 1 ? "-" : "+") + std::to_string(int(std::lround(std::fabs(factor - 1) * 100))) + "%";
}

const std::array<Perturbation, 6>& perturbations() {
  static const std::array<Perturbation, 6> all = {
      Perturbation{Tier::Intra, 0.8}, {Tier::Intra, 1.2}, {Tier::Inter, 0.8},
      {Tier::Inter, 1.2},             {Tier::Gemm, 0.8},  {Tier::Gemm, 1.2}};
  return all;
}

namespace {

// Times of every candidate on profile q, sharing plans and links as the search does.
std::vector<double> reprice(const Job& job, const MachineProfile& q, const SearchResult& r) {
  LinkCache cache(q, job.gpus);
  std::map<std::tuple<uint32_t, uint16_t, Recompute, bool, int>, StagedPlan> plans;
  std::vector<double> out;
  StagedTimes times;
  const double tokens = double(job.batch) * job.model.seq_len;
  for (const Candidate& c : r.candidates) {
    Config cfg = candidate_config(c, r.grids, job.dtype);
    auto key = std::make_tuple(uint32_t(c.grid), c.micro_batch, cfg.recompute, cfg.sequence_parallel, cfg.virtual_stages);
    auto it = plans.find(key);
    if (it == plans.end()) {
      it = plans.emplace(key, StagedPlan{}).first;
      make_staged_plan(job, q, cfg.grid, cfg.micro_batch, cfg.recompute, it->second, cfg.sequence_parallel,
                       cfg.virtual_stages);
    }
    const PairLink& pairs = cache.pair(axis_stride(cfg.grid, cfg.order, Axis::P), cfg.grid.p);
    staged_term_times(it->second, placement_links(q, cfg.grid, cfg.order, &cache), pairs, times);
    out.push_back(combine_staged(it->second, times, cfg.overlap, {cfg.offload, cfg.shard_optimizer}, tokens).time_s);
  }
  return out;
}

}  // namespace

std::vector<Confidence> assess(const Job& job, const MachineProfile& p, const SearchResult& r) {
  std::vector<Confidence> conf(r.top.size());
  for (size_t i = 0; i < r.top.size(); ++i) {
    double t = r.candidates[i].time_s;
    conf[i].margin = i + 1 < r.candidates.size() ? (r.candidates[i + 1].time_s - t) / t : 0;
  }
  const auto& ps = perturbations();
  for (size_t k = 0; k < ps.size(); ++k) {
    std::vector<double> t = reprice(job, scaled(p, ps[k].tier, ps[k].factor), r);
    for (size_t i = 0; i < r.top.size(); ++i) {
      int rank = 1;
      for (size_t j = 0; j < t.size(); ++j)
        if (t[j] < t[i] || (t[j] == t[i] && j < i)) ++rank;
      conf[i].rank_under[k] = rank;
      if (rank != int(i) + 1) {
        conf[i].stable = false;
        conf[i].moved += (conf[i].moved.empty() ? "" : ", ") + ps[k].name() + ": #" + std::to_string(rank);
      }
    }
  }
  return conf;
}

PredictedRange predicted_range(const Job& job, const MachineProfile& p, const Config& c) {
  const Uncertainty& u = p.uncertainty;
  PredictedRange r;
  r.stated = u.stated;
  r.inter = u.inter;
  if (u.checked_nodes > 0)
    for (const AxisLink& l : placement_links(p, c.grid, c.order))
      if (l.across && l.members_per_node > 0 && (l.size + l.members_per_node - 1) / l.members_per_node > u.checked_nodes)
        r.beyond_checked = true;
  if (r.beyond_checked) r.inter = u.beyond;
  // A term's time ×τ: its bandwidth ÷τ, its latency ×τ.
  auto at = [&](double sign) {
    auto tau = [&](double e) { return 1 + sign * e; };
    MachineProfile q = scaled(p, Tier::Intra, 1 / tau(u.intra), tau(u.intra));
    q = scaled(q, Tier::Inter, 1 / tau(r.inter), tau(r.inter));
    q = scaled(q, Tier::Gemm, 1 / tau(u.compute));
    return predict_estimate(job, q, c).time_s;
  };
  r.low = at(-1);
  r.high = at(+1);
  return r;
}

std::string range_basis(const MachineProfile& p) {
  const Uncertainty& u = p.uncertainty;
  auto pct = [](double e) { return "±" + std::to_string(int(std::lround(100 * e))) + "%"; };
  std::string s = "compute " + pct(u.compute) + ", intra-node " + pct(u.intra) + ", inter-node " + pct(u.inter);
  if (u.checked_nodes > 0)
    s += " (" + pct(u.beyond) + " beyond " + std::to_string(u.checked_nodes) + " nodes)";
  return s + (u.stated ? ": the profile's stated errors" : ": assumed (the profile states none)");
}

}  // namespace ff
