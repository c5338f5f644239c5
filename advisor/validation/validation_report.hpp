#pragma once
// The report `advisor validate` writes and `advisor calibrate --from-runs`
// reads: the job, the machine profile it was priced with, every run.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "advisor/calibration/refit.hpp"
#include "advisor/validation/validation_placement.hpp"

namespace ff::advisor {

// The "job" object; two reports describe the same job when these are equal.
nlohmann::json job_json(const Job& job, const std::string& model_arg, int steps);

struct ReportRuns {
  Job job;
  nlohmann::json machine_profile;   // the profile the predictions used
  std::vector<MeasuredRun> runs;    // status "ok" only
  std::vector<std::string> keys;    // config_label of each
  std::vector<int> repeats_ok;      // the successful repeats behind each median
};
// A run's "measured" is the median over its repeats (reports from before
// repeats have one measurement there too). Throws InputError naming the file
// and field that is wrong.
ReportRuns read_report_runs(const nlohmann::json& report, const std::string& origin);

// --- repeats of one configuration ---------------------------------------------
// A run of the report is one configuration: "key", "config", "predicted",
// "repeats" (each {"repeat": 1…, "status", the measurement of that run or its
// "error", "log", "record", "wall_s", "command"}), and from those "measured"
// and "status".

// The successful repeats of a run, by repeat number; a run from a report
// made before repeats (its one measurement at the top) is its repeat 1.
nlohmann::json finished_repeats(const nlohmann::json& run);
// Sets "measured" (each quantity the median over the successful repeats,
// their "spread", "repeats_ok"), "status" ("ok" with one success) and, for a
// run with none, "error" and "log_tail" of its last failure.
void summarize_run(nlohmann::json& run);
// The median over runs with two or more successful repeats of their relative
// spread; null when there are none.
nlohmann::json median_spread(const nlohmann::json& runs);

// The report's "placement" section: the pair of placement_check with, once
// they ran, their measured (median) times looked up in `runs`.
nlohmann::json placement_json(const PlacementCheck& pc, const nlohmann::json& runs);

// The table of runs and the scores, for people.
void print_validation_text(const nlohmann::json& report);

}  // namespace ff::advisor
