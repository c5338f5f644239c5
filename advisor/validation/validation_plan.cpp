#include "advisor/validation/validation_plan.hpp"

#include <algorithm>
#include <random>

#include "advisor/core/error.hpp"
#include "advisor/core/json_fields.hpp"
#include "advisor/model/memory_model.hpp"
#include "advisor/validation/validation_report.hpp"
#include "advisor/validation/validation_stats.hpp"

namespace ff::advisor {

using nlohmann::json;

namespace {

std::vector<int> micro_batches(const SearchOptions& so, long long share) {
  std::vector<int> out;
  for (int mb = 1; mb <= share; ++mb) {
    bool wanted = so.micro_batches.empty() ? mb <= so.max_micro_batch
                                           : std::count(so.micro_batches.begin(), so.micro_batches.end(), mb) > 0;
    if (wanted && share % mb == 0) out.push_back(mb);
  }
  return out;
}

}  // namespace

std::vector<std::vector<Config>> feasible_by_grid(const Job& job, const MachineProfile& p, const SearchOptions& so,
                                                  std::map<std::string, int>& skipped) {
  std::vector<Grid> grids;
  for (int P : pipeline_choices(job, so))
    for (Grid g : factorizations(job.gpus / P)) {
      g.p = P;
      grids.push_back(g);
    }
  std::vector<std::vector<Config>> out;
  for (const Grid& g : grids) {
    std::string why = split_problem(job, g, 1);
    if (why.empty()) why = engine_split_problem(job.model, g);
    if (!why.empty()) {
      ++skipped[why.substr(0, why.find_first_of("=%"))];
      continue;
    }
    std::vector<Order> orders = distinct_orders(g);
    if (so.fixed_order) orders = {canonical_order(g, so.order)};
    std::vector<Config> cs;
    for (int mb : micro_batches(so, job.batch / (1LL * g.z * g.d))) {
      // What the search tries here: the engine runs the interleaved schedule
      // and sequence parallelism (MODEL.md §9, §13).
      const std::vector<int> chunks = virtual_stage_choices(job, g, mb, so);
      const std::vector<bool> sps = sequence_parallel_choices(job, g, mb, so);
      for (Recompute rc : so.recompute)
        for (bool off : {false, true})
          for (bool shard : {false, true}) {
            if ((off && !so.offload_on) || (!off && !so.offload_off) || (shard && !so.shard_on) ||
                (!shard && !so.shard_off) || (off && shard))  // the engine runs one or the other
              continue;
            if (shard && g.d == 1) continue;  // nothing to shard over
            for (int f = 0; f < 8; ++f) {
              Overlap ov{bool(f & 1), bool(f & 2), bool(f & 4)};
              if (so.fixed_overlap) {
                if (f) break;
                ov = so.overlap;
              }
              if (!so.fixed_overlap && ov.oar && g.x == 1 && g.y == 1) continue;
              if (!so.fixed_overlap && (ov.ors || ov.oag) && g.z == 1) continue;
              for (bool sp : sps)
                for (int v : chunks) {
                  const MemoryUse use = memory_use(job, p, g, mb, rc, ov, OptimizerState{off, shard}, sp, nullptr, v);
                  if (!fits_in_memory(use, p)) {
                    ++skipped["does not fit in memory"];
                    continue;
                  }
                  for (const Order& ord : orders) {
                    cs.push_back(Config{g, ord, mb, rc, ov, Dtype::FP32});
                    cs.back().offload = off;
                    cs.back().shard_optimizer = shard;
                    cs.back().sequence_parallel = sp;
                    cs.back().virtual_stages = v;
                  }
                }
            }
          }
    }
    if (!cs.empty()) out.push_back(std::move(cs));
  }
  return out;
}

std::vector<Config> run_order(std::vector<std::vector<Config>> by_grid, unsigned long long seed) {
  std::mt19937_64 rng(seed);  // specified bit for bit: the same sample everywhere
  for (auto& cs : by_grid)
    for (size_t i = cs.size(); i > 1; --i) std::swap(cs[i - 1], cs[rng() % i]);
  std::vector<Config> out;
  for (size_t round = 0;; ++round) {
    bool any = false;
    for (const auto& cs : by_grid)
      if (round < cs.size()) out.push_back(cs[round]), any = true;
    if (!any) return out;
  }
}

std::vector<Config> plan_of(const std::vector<std::vector<Config>>& by_grid, unsigned long long seed, int max_configs,
                            const PlacementCheck& pc) {
  std::vector<Config> order = run_order(by_grid, seed);
  auto at = [&](const Config& c) { return size_t(std::find(order.begin(), order.end(), c) - order.begin()); };
  std::vector<size_t> forced = {at(pc.top_pick)};
  if (pc.has_counterpart) forced.push_back(at(pc.counterpart));
  std::vector<Config> plan;
  for (size_t i : sample_with(order.size(), size_t(max_configs), forced)) plan.push_back(order[i]);
  return plan;
}

json kept_runs(const json& old) {
  json out = json::array();
  std::map<std::string, bool> seen;
  for (const auto& r : old["runs"]) {
    json reps = finished_repeats(r);
    std::string key = r.value("key", "");
    if (reps.empty() || seen[key]) continue;
    seen[key] = true;
    json run = r;
    for (const char* k : {"log", "record", "wall_s", "command"}) run.erase(k);  // per repeat now
    run["repeats"] = reps;
    summarize_run(run);
    out.push_back(run);
  }
  return out;
}

json load_resumed(const std::string& out, const json& fresh) {
  json old = read_json_file(out);
  auto differs = [&](const char* what, const json& a, const json& b) {
    if (a != b)
      input_error(out + " is a validation of another job (its " + what + " is " + a.dump() + ", this one's " +
                  b.dump() + "); give another --out, or the same options to resume it");
  };
  if (!old.is_object() || !old.contains("job") || !old.contains("runs") || !old["runs"].is_array())
    input_error(out + ": not an advisor validate report (no \"job\" and \"runs\")");
  for (const char* k : {"model", "ranks", "batch_sequences", "steps", "dtype"})
    differs(k, old["job"].value(k, json(nullptr)), fresh["job"][k]);
  // Reports from before --device ran on the cpu device.
  const json old_device = old.value("device", json{{"name", "cpu"}});
  if (old_device != fresh.at("device"))
    input_error(out + " was measured on another device (" + old_device.dump() + ", this one " +
                fresh.at("device").dump() + "); resume with the same --device and pace, or give another --out");
  if (old.value("machine_profile", json(nullptr)) != fresh["machine_profile"])
    input_error(out + " was priced with another machine profile (" + old.value("machine", std::string("?")) +
                "); resume with the same --machine");
  return old;
}

}  // namespace ff::advisor
