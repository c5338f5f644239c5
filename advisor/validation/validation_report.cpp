#include "advisor/validation/validation_report.hpp"

#include <algorithm>
#include <iostream>

#include "advisor/core/json_fields.hpp"
#include "advisor/core/measurement.hpp"  // median
#include "advisor/output/format.hpp"
#include "advisor/validation/validation_stats.hpp"

namespace ff::advisor {

using nlohmann::json;

json job_json(const Job& job, const std::string& model_arg, int steps) {
  return {{"model", to_json(job.model)}, {"model_arg", model_arg}, {"ranks", job.gpus},
          {"batch_sequences", job.batch},   {"steps", steps},         {"dtype", dtype_name(job.dtype)}};
}

ReportRuns read_report_runs(const json& report, const std::string& origin) {
  Fields f(report, origin);
  Fields job = f.object("job");
  ReportRuns r;
  r.job.model = model_from_json(job.object("model").json(), origin + ": field 'job.model'");
  r.job.gpus = job.integer("ranks", 1);
  r.job.batch = job.integer("batch_sequences", 1);
  try {
    r.job.dtype = parse_dtype(job.string("dtype"));
  } catch (const InputError&) {
    job.fail("dtype", "\"bf16\", \"fp16\" or \"fp32\"");
  }
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
    m.comm_s = per_axis_numbers(comm);
    if (meas.has("device_s")) m.device_s = meas.number("device_s");
    r.runs.push_back(m);
    r.keys.push_back(config_label(m.config));
    r.repeats_ok.push_back(int(meas.integer_or("repeats_ok", 1, 1)));
  }
  return r;
}

// --- repeats ---------------------------------------------------------------

namespace {

int repeat_number(const json& r) { return r.value("repeat", 0); }

void sort_repeats(json& reps) {
  std::stable_sort(reps.begin(), reps.end(), [](const json& a, const json& b) { return repeat_number(a) < repeat_number(b); });
}

bool is_ok(const json& r) { return r.is_object() && r.value("status", "") == "ok"; }

}  // namespace

json finished_repeats(const json& run) {
  json out = json::array();
  if (run.contains("repeats") && run["repeats"].is_array()) {
    for (const auto& r : run["repeats"])
      if (is_ok(r)) out.push_back(r);
  } else if (is_ok(run) && run.contains("measured")) {
    json r = run["measured"];
    r["repeat"] = 1;
    r["status"] = "ok";
    for (const char* k : {"log", "record", "wall_s", "command"})
      if (run.contains(k)) r[k] = run[k];
    out.push_back(r);
  }
  sort_repeats(out);
  return out;
}

void summarize_run(json& run) {
  json& reps = run["repeats"];
  sort_repeats(reps);
  const std::string origin = "run " + run.value("key", std::string("?"));
  std::vector<StepTimes> ok;
  std::vector<double> device_s;  // the paced device's time, where every successful repeat has it
  bool all_device = true;
  const json *first_ok = nullptr, *last_failed = nullptr;
  for (size_t i = 0; i < reps.size(); ++i) {
    if (!is_ok(reps[i])) {
      last_failed = &reps[i];
      continue;
    }
    Fields f(reps[i], origin, "repeats[" + std::to_string(i) + "]");
    Fields c = f.object("comm_s");
    ok.push_back({f.positive("time_s"), f.number("compute_s"), per_axis_numbers(c)});
    if (f.has("device_s")) device_s.push_back(f.number("device_s"));
    else all_device = false;
    if (!first_ok) first_ok = &reps[i];
  }
  for (const char* k : {"measured", "error", "log_tail"}) run.erase(k);
  if (ok.empty()) {
    run["status"] = "failed";
    run["error"] = last_failed ? last_failed->value("error", std::string("failed")) : "no repeats ran";
    if (last_failed && last_failed->contains("log_tail")) run["log_tail"] = (*last_failed)["log_tail"];
    return;
  }
  RepeatSummary s = summarize_repeats(ok);
  run["measured"] = {{"time_s", s.median.time_s},
                     {"compute_s", s.median.compute_s},
                     {"comm_s", per_axis_json(s.median.comm_s)},
                     {"of", "median over the successful repeats, each quantity on its own"},
                     {"repeats_ok", s.n},
                     {"spread", {{"min_s", s.min_s}, {"max_s", s.max_s}, {"relative", s.relative_spread}}},
                     {"bytes_per_step", first_ok->value("bytes_per_step", json(nullptr))}};
  if (all_device) run["measured"]["device_s"] = median(device_s);
  run["status"] = "ok";
}

json median_spread(const json& runs) {
  std::vector<double> v;
  for (const auto& r : runs)
    if (is_ok(r) && r.contains("measured") && r["measured"].value("repeats_ok", 1) >= 2)
      v.push_back(r["measured"]["spread"]["relative"].get<double>());
  return v.empty() ? json(nullptr) : json(median(v));
}

// --- placement -------------------------------------------------------------

json placement_json(const PlacementCheck& pc, const json& runs) {
  auto measured = [&](const std::string& key) {
    for (const auto& r : runs)
      if (r.value("key", "") == key && is_ok(r)) return r["measured"]["time_s"];
    return json(nullptr);
  };
  const std::string top = config_label(pc.top_pick);
  json j = {{"rule", "the top pick is the predicted fastest of every feasible configuration, sampled or not; its "
                     "heaviest axis has the most bytes per step; the counterpart is the same configuration under "
                     "the predicted fastest other placement order that sends that axis across nodes"},
            {"top_pick", top},
            {"heavy_axis", axis_name(pc.heavy_axis)},
            {"heavy_axis_bytes_per_step", pc.heavy_bytes},
            {"heavy_axis_inside", pc.heavy_inside},
            {"predicted_s", {{"top_pick", pc.top_pick_s}}},
            {"measured_s", {{"top_pick", measured(top)}}}};
  if (!pc.has_counterpart) {
    j["not_applicable"] = pc.not_applicable;
    return j;
  }
  const std::string other = config_label(pc.counterpart);
  j["counterpart"] = other;
  j["predicted_s"]["counterpart"] = pc.counterpart_s;
  j["measured_s"]["counterpart"] = measured(other);
  j["holds_predicted"] = pc.top_pick_s < pc.counterpart_s;
  const json &mt = j["measured_s"]["top_pick"], &mc = j["measured_s"]["counterpart"];
  j["holds_measured"] = mt.is_number() && mc.is_number() ? json(mt.get<double>() < mc.get<double>()) : json(nullptr);
  return j;
}

// --- text ------------------------------------------------------------------

namespace {

std::string pct(const json& v) { return v.is_number() ? fixed(100 * v.get<double>(), 1) + "%" : "n/a"; }
std::string num2(const json& v) { return v.is_number() ? fixed(v.get<double>(), 2) : "n/a"; }
std::string secs(const json& v) { return v.is_number() ? seconds(v.get<double>()) : "not measured"; }
std::string holds(const json& v) { return v.get<bool>() ? "holds" : "does not hold"; }

void print_placement(const json& p) {
  if (p.is_null()) return;
  std::cout << "Placement check: ";
  if (p.contains("not_applicable")) {
    std::cout << "not applicable, " << p["not_applicable"].get<std::string>() << "\n";
    return;
  }
  std::cout << "top pick " << p["top_pick"].get<std::string>() << " keeps " << p["heavy_axis"].get<std::string>()
            << " (its heaviest axis, " << bytes_h(p["heavy_axis_bytes_per_step"].get<double>())
            << " per step) inside a node; " << p["counterpart"].get<std::string>()
            << " sends it across. Predicted " << secs(p["predicted_s"]["top_pick"]) << " against "
            << secs(p["predicted_s"]["counterpart"]) << " (" << holds(p["holds_predicted"]) << "), measured ";
  if (p["holds_measured"].is_boolean())
    std::cout << secs(p["measured_s"]["top_pick"]) << " against " << secs(p["measured_s"]["counterpart"]) << " ("
              << holds(p["holds_measured"]) << ")\n";
  else
    std::cout << "not known: the two have not both run successfully\n";
}

}  // namespace

void print_validation_text(const json& report) {
  Table t({"#", "<configuration", "<status", "predicted", "measured", "spread", "error"});
  int i = 0;
  for (const auto& r : report["runs"]) {
    double p = r["predicted"]["time_s"].get<double>();
    bool ok = is_ok(r);
    size_t failed = 0, n = r.contains("repeats") ? r["repeats"].size() : 1;
    if (r.contains("repeats"))
      for (const auto& x : r["repeats"]) failed += !is_ok(x);
    std::string status = r["status"].get<std::string>();
    if (ok && failed) status += " (" + std::to_string(failed) + " of " + std::to_string(n) + " failed)";
    std::string spread = "-";
    double m = 0;
    if (ok) {
      const json& meas = r["measured"];
      m = meas["time_s"].get<double>();
      if (meas.value("repeats_ok", 1) >= 2) spread = "±" + fixed(50 * meas["spread"]["relative"].get<double>(), 1) + "%";
    }
    t.row({std::to_string(++i), r["key"].get<std::string>(), status, seconds(p), ok ? seconds(m) : "-", spread,
           ok ? fixed(100 * (p - m) / m, 1) + "%" : "-"});
  }
  std::cout << t.str() << "\n";
  const json& s = report["summary"];
  if (s.value("n", 0) == 0) {
    std::cout << "No successful runs to score.\n";
    print_placement(report.value("placement", json(nullptr)));
    return;
  }
  const int repeats = report.value("repeats", 1);
  if (repeats > 1)
    std::cout << "Measured: the median of " << repeats << " repeats per configuration, run in interleaved passes; "
              << "spread ±half of (max - min) / median";
  else
    std::cout << "Measured: one run per configuration (--repeats for more)";
  if (s.contains("median_spread") && s["median_spread"].is_number())
    std::cout << ", its median over configurations ±" << fixed(50 * s["median_spread"].get<double>(), 1) << "%";
  std::cout << "\n";
  const json device = report.value("device", json{{"name", "cpu"}});
  if (device.value("name", "cpu") == "paced" && device.contains("pace")) {
    const json& p = device["pace"];
    std::cout << "Device: paced, " << p.value("gemm_gflops", 0.0) << " GFLOP/s, " << p.value("gbps", 0.0)
              << " GB/s, MPI waits poll every " << p.value("poll_us", 0.0) << " us, host link "
              << p.value("host_gbps", 0.0) << " GB/s each way: compute is known by construction, the communication part is scored on its own\n";
  }
  std::cout << "In sample (the profile as given, nothing fitted), " << s["n"] << " runs: MAPE " << pct(s["mape"])
            << ", Spearman " << num2(s["spearman"]) << ", Kendall " << num2(s["kendall"]) << "; top pick "
            << s["top_pick"].get<std::string>() << " is " << pct(s["regret"]) << " slower than the measured best "
            << s["measured_best"].get<std::string>() << "\n";
  if (s.contains("comm_mape")) {
    const json& share = s["comm_share_range"];
    std::cout << "Communication part (time per step - device time): MAPE " << pct(s["comm_mape"])
              << "; its share of a step " << pct(share[0]) << " to " << pct(share[1]) << " over the runs\n";
  }
  auto inside_of = [](const json& c, const char* what) {
    return std::to_string(c[what].get<int>()) + " of " + std::to_string(c["n"].get<int>());
  };
  auto inside = [&](const json& c) { return inside_of(c, "inside"); };
  if (s.contains("range_coverage"))
    std::cout << "Ranges: " << inside(s["range_coverage"]) << " runs measured inside their predicted range ("
              << s["range_coverage"]["basis"].get<std::string>() << ")";
  if (report["out_of_sample"].contains("pooled") && report["out_of_sample"]["pooled"]["fitted"].contains("range_coverage"))
    std::cout << "; out of sample, under the other half's fit, "
              << inside(report["out_of_sample"]["pooled"]["fitted"]["range_coverage"]);
  if (s.contains("range_coverage")) std::cout << "\n";
  if (s.contains("switch_group_crossing"))
    std::cout << "Switch groups: " << inside_of(s["switch_group_crossing"], "crossing")
              << " runs have a group or a stage pair that leaves its switch group (priced with the global link)\n";
  print_placement(report.value("placement", json(nullptr)));
  const json& oos = report["out_of_sample"];
  if (oos.contains("skipped")) {
    std::cout << "Out of sample: skipped, " << oos["skipped"].get<std::string>() << "\n";
    return;
  }
  const json &raw = oos["pooled"]["raw"], &fit = oos["pooled"]["fitted"];
  std::cout << "Out of sample (refit on one half, scored on the other, both ways): MAPE " << pct(raw["mape"]) << " -> "
            << pct(fit["mape"]) << ", Spearman " << num2(raw["spearman"]) << " -> " << num2(fit["spearman"])
            << ", Kendall " << num2(raw["kendall"]) << " -> " << num2(fit["kendall"]) << ", regret " << pct(raw["regret"])
            << " -> " << pct(fit["regret"]);
  if (fit.contains("comm_mape"))
    std::cout << ", communication part MAPE " << pct(raw["comm_mape"]) << " -> " << pct(fit["comm_mape"]);
  std::cout << "\n";
  for (const auto& h : oos["halves"]) {
    std::string f;
    for (const auto& [k, v] : h["factors"].items())
      f += (f.empty() ? "" : ", ") + k + " " + fixed(v.get<double>(), 3) + (h["held"].contains(k) ? " (held)" : "") +
           (std::count(h["at_bound"].begin(), h["at_bound"].end(), k) ? " (at its bound)" : "");
    // The pooled regret picks among runs priced by two different fits; each
    // half's own is one fitted profile choosing among runs it did not see.
    const json& scored = h["fitted"];
    std::cout << "  fit on " << h["fit_on"].size() << " runs: " << f << "; on the other "
              << h["scored_on"].size() << ": MAPE " << pct(scored["mape"])
              << (scored.contains("comm_mape") ? " (communication part " + pct(scored["comm_mape"]) + ")" : "")
              << ", regret " << pct(scored["regret"])
              << " (top pick " << scored.value("top_pick", "?") << ")\n";
  }
}

}  // namespace ff::advisor
