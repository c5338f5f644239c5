#pragma once
// The report `advisor validate` writes and `advisor calibrate --from-runs`
// reads: the job, the machine profile it was priced with, every run.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "refit.hpp"

namespace ff::cli {



// The "job" object; two reports describe the same job when these are equal.
nlohmann::json job_json(const Job& job, const std::string& model_arg, int steps);

struct ReportRuns {
  Job job;
  nlohmann::json machine_profile;   // the profile the predictions used
  std::vector<MeasuredRun> runs;    // status "ok" only
  std::vector<std::string> keys;    // config_label of each
};
// Throws InputError naming the file and field that is wrong.
ReportRuns read_report_runs(const nlohmann::json& report, const std::string& origin);

}  // namespace ff::cli
