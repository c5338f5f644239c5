#pragma once
// What `advisor validate` says of its runs: the scores in sample and out of
// sample, as report JSON, and the plot.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "advisor/calibration/refit.hpp"
#include "advisor/model/cost_model.hpp"

namespace ff::advisor {

// The report's successful runs, each with its prediction under one profile.
struct OkRuns {
  std::vector<MeasuredRun> runs;
  std::vector<std::string> keys;
  std::vector<int> repeats_ok;  // the successful repeats behind each median
  std::vector<double> predicted, measured;
  std::vector<double> predicted_compute;  // the prediction's compute part, per run
  std::vector<double> low, high;          // the range each is predicted within (MODEL.md §8, "Ranges")
  std::string range_basis;
  // Per run, whether it crosses a switch group's uplink; empty where the
  // profile has no switch groups.
  std::vector<bool> crossing;
};
OkRuns ok_runs(const nlohmann::json& runs, const Job& job, const MachineProfile& m);

// MAPE, rank correlations and regret of the runs as priced (the report's
// "summary"); with the paced device's time in every run also the MAPE of the
// communication part ("comm_mape") and the range of its share of a step
// ("comm_share_range": [min, max], 1 − device_s / time); on a profile with
// switch groups, how many runs cross an uplink ("switch_group_crossing").
nlohmann::json summary_json(const OkRuns& ok);
// Fit on one half, score on the other, both ways (the report's
// "out_of_sample"); "comm_mape" in each score where the summary has it, and
// the pooled fit's "range_coverage", each run's range under the other half's fit.
nlohmann::json out_of_sample_json(const Job& job, const MachineProfile& m, const OkRuns& ok);

// Predicted vs measured per run (the placement check's pair ringed), and
// the per-axis breakdown of the fastest measured, as an SVG at path.
void write_validation_plot(const std::string& path, const Job& job, const MachineProfile& machine, const OkRuns& ok,
                           const nlohmann::json& placement);

}  // namespace ff::advisor
