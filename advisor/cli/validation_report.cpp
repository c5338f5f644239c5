#include "validation_report.hpp"

#include "json_fields.hpp"

namespace ff::cli {

nlohmann::json job_json(const Job& job, const std::string& model_arg, int steps) {
  return {{"model", to_json(job.model)}, {"model_arg", model_arg}, {"ranks", job.gpus},
          {"batch_sequences", job.batch},   {"steps", steps},         {"dtype", dtype_name(job.dtype)}};
}

ReportRuns read_report_runs(const nlohmann::json& report, const std::string& origin) {
  Fields f(report, origin);
  Fields job = f.object("job");
  ReportRuns r;
  r.job.model = model_from_json(job.object("model").json(), origin + ": field 'job.model'");
  r.job.gpus = job.integer("ranks", 1);
  r.job.batch = job.integer("batch_sequences", 1);
  r.job.dtype = parse_dtype(job.string("dtype"));
  if (!f.has("machine_profile") || !report["machine_profile"].is_object())
    f.fail("machine_profile", "the machine profile the predictions used");
  r.machine_profile = report["machine_profile"];
  const auto& runs = f.array("runs");
  for (size_t i = 0; i < runs.size(); ++i) {
    Fields run(runs[i], origin, "runs[" + std::to_string(i) + "]");
    if (run.string("status") != "ok") continue;
    MeasuredRun m;
    m.config = config_from_json(run.json().at("config"), run.where("config"));
    Fields meas = run.object("measured");
    m.time_s = meas.positive("time_s");
    m.compute_s = meas.number("compute_s");
    Fields comm = meas.object("comm_s");
    m.comm_s = {comm.number("x"), comm.number("y"), comm.number("z"), comm.number("data")};
    r.runs.push_back(m);
    r.keys.push_back(config_label(m.config));
  }
  return r;
}

}  // namespace ff::cli
