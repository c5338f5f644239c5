// The readers `advisor validate` runs, from the validation library it calls.
#include <iostream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "advisor/core/machine_profile.hpp"
#include "advisor/validation/run_record.hpp"
#include "advisor/validation/validation_placement.hpp"
#include "advisor/validation/validation_plan.hpp"
#include "advisor/validation/validation_report.hpp"
#include "advisor/validation/validation_scores.hpp"
#include "advisor/validation/validation_stats.hpp"

#include "tests/fuzz/fuzz_common.hpp"
#include "tests/fuzz/validate_hooks.hpp"

namespace fuzz {

namespace {

using nlohmann::json;
using namespace ff;
using namespace ff::advisor;

struct Fixed {
  std::string model = "gpt-val.json";
  int steps = 3, repeats = 2;
  Job job;
  json machine_json;
  MachineProfile machine;
  PlacementCheck pc;
  json fresh;  // what run() builds before it reads the old report
};

const Fixed& fixed_job() {
  static const Fixed f = [] {
    Fixed x;
    x.job.model = ModelSpec{"gpt-val", 1, 16, 2, 64, 32, 32, 8};
    x.job.gpus = 4;
    x.job.batch = 8;
    x.job.dtype = Dtype::FP32;
    std::string origin;
    x.machine_json = machine_json(default_machine(), origin);
    x.machine = machine_from_json(x.machine_json, origin);
    std::map<std::string, int> skipped;
    std::vector<Config> feasible;
    SearchOptions plain;  // validate's defaults: neither offload nor a sharded optimizer
    plain.offload_on = plain.shard_on = false;
    for (const auto& cs : feasible_by_grid(x.job, x.machine, plain, skipped)) feasible.insert(feasible.end(), cs.begin(), cs.end());
    x.pc = placement_check(x.job, x.machine, feasible);
    x.fresh = {{"job", job_json(x.job, x.model, x.steps)}, {"machine_profile", x.machine_json},
               {"device", {{"name", "cpu"}}}, {"runs", json::array()}};
    return x;
  }();
  return f;
}

// A run's "measured", as summarize_run writes it: every time a number >= 0.
void check_measured(const json& run, const std::string& where) {
  if (run.value("status", "") != "ok") return;
  if (!run.contains("measured")) finding(where + ": status ok without \"measured\"");
  const json& m = run["measured"];
  check_times(m, where + ".measured");
  for (const char* k : {"time_s", "compute_s"})
    if (!m.contains(k) || !m[k].is_number()) finding(where + ".measured." + k + " is not a number");
  if (!(m["time_s"].get<double>() > 0)) finding(where + ".measured.time_s is not > 0");
}

// The scores: finite where they are numbers (null is "not defined").
void check_scores(const json& s, const std::string& where) {
  for (const char* k : {"mape", "regret"})
    if (s.contains(k) && s[k].is_number() && !(s[k].get<double>() >= 0)) finding(where + "." + k + " < 0");
}

Config record_config() {
  Config c;
  c.grid = Grid{2, 1, 1, 2};
  c.order = parse_order("xyzd");
  c.micro_batch = 1;
  c.dtype = Dtype::FP32;
  return c;
}

}  // namespace

bool read_run_record(const std::string& path) {
  const Fixed& f = fixed_job();
  json measured;
  if (!accepts([&] { measured = record_measured(path, record_config(), "cpu"); })) return false;
  // run() then files the repeat under its configuration and summarizes.
  json rep = measured;
  rep.update({{"repeat", 1}, {"status", "ok"}, {"record", path}});
  json run = {{"key", config_label(record_config())}, {"config", to_json(record_config())},
              {"repeats", json::array({rep})}};
  if (!accepts([&] { summarize_run(run); })) finding("summarize_run refused a repeat record_measured accepted");
  check_measured(run, "run");
  json runs = json::array({run});
  json summary;
  if (!accepts([&] { summary = summary_json(ok_runs(runs, f.job, f.machine)); }))
    finding("the scores refused a run record_measured accepted");
  check_scores(summary, "summary");
  return true;
}

bool resume_report(const std::string& path) {
  const Fixed& f = fixed_job();
  json report = f.fresh;
  return accepts([&] {
    report["runs"] = kept_runs(load_resumed(path, report));
    // run(): where each configuration's entry is and the repeats it still needs.
    for (const auto& r : report["runs"]) {
      (void)r["key"].get<std::string>();
      std::vector<int> finished;
      for (const auto& x : r["repeats"]) finished.push_back(x.value("repeat", 0));
      (void)missing_repeats(finished, f.repeats);
    }
    // save()
    OkRuns ok = ok_runs(report["runs"], f.job, f.machine);
    report["summary"] = summary_json(ok);
    report["summary"]["median_spread"] = median_spread(report["runs"]);
    report["placement"] = placement_json(f.pc, report["runs"]);
    // The end of run() adds out_of_sample_json: the refit it runs twice is
    // calibrate --from-runs's, which the target runs on the same report.
    report["out_of_sample"] = {{"skipped", "not scored here"}};
    for (size_t i = 0; i < report["runs"].size(); ++i) check_measured(report["runs"][i], "runs[" + std::to_string(i) + "]");
    check_scores(report["summary"], "summary");
    check_times(report["placement"]["predicted_s"], "placement.predicted_s");
    write_validation_plot(scratch("report.svg"), f.job, f.machine, ok, report["placement"]);
    std::ostringstream table;
    std::streambuf* old = std::cout.rdbuf(table.rdbuf());
    try {
      print_validation_text(report);
    } catch (...) {
      std::cout.rdbuf(old);
      throw;
    }
    std::cout.rdbuf(old);
  });
}

}  // namespace fuzz
