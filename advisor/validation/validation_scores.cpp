#include "advisor/validation/validation_scores.hpp"

#include <algorithm>
#include <cmath>

#include "advisor/core/atomic_file.hpp"
#include "advisor/model/sensitivity.hpp"
#include "advisor/output/format.hpp"
#include "advisor/validation/validation_report.hpp"
#include "advisor/validation/validation_stats.hpp"
#include "advisor/validation/validation_svg.hpp"

namespace ff::advisor {

using nlohmann::json;

namespace {

json scores_json(const Scores& s, const std::vector<std::string>& keys) {
  auto num = [](double v) { return std::isfinite(v) ? json(v) : json(nullptr); };
  return {{"n", s.n},
          {"mape", num(s.mape)},
          {"spearman", num(s.spearman)},
          {"kendall", num(s.kendall)},
          {"top_pick", keys[s.regret.top_pick]},
          {"measured_best", keys[s.regret.measured_best]},
          {"regret", num(s.regret.value)}};
}

// The communication part's MAPE over runs `idx`, priced by `time` and
// `compute` (indexed like ok.runs); null where the runs lack device_s.
json comm_mape_json(const OkRuns& ok, const std::vector<double>& time, const std::vector<double>& compute,
                    const std::vector<size_t>& idx) {
  if (!paced(ok.runs)) return nullptr;
  std::vector<double> pt, pc, mt, md;
  for (size_t i : idx) {
    pt.push_back(time[i]), pc.push_back(compute[i]);
    mt.push_back(ok.runs[i].time_s), md.push_back(*ok.runs[i].device_s);
  }
  double v = comm_mape(pt, pc, mt, md);
  return std::isfinite(v) ? json(v) : json(nullptr);
}

// How many runs were measured inside [low, high].
json coverage_json(const OkRuns& ok, const std::vector<double>& low, const std::vector<double>& high) {
  int inside = 0;
  for (size_t i = 0; i < ok.measured.size(); ++i) inside += low[i] <= ok.measured[i] && ok.measured[i] <= high[i];
  const double n = double(ok.measured.size());
  return {{"inside", inside}, {"n", ok.measured.size()}, {"share", n > 0 ? inside / n : 0.0}, {"basis", ok.range_basis}};
}

std::vector<size_t> all_of(const OkRuns& ok) {
  std::vector<size_t> idx(ok.runs.size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  return idx;
}

}  // namespace

OkRuns ok_runs(const json& runs, const Job& job, const MachineProfile& m) {
  json report = {{"job", job_json(job, "", 0)}, {"machine_profile", json::object()}, {"runs", runs}};
  ReportRuns rr = read_report_runs(report, "report");
  OkRuns ok;
  ok.runs = rr.runs;
  ok.keys = rr.keys;
  ok.repeats_ok = rr.repeats_ok;
  for (const auto& r : ok.runs) {
    Estimate e = predict_estimate(job, m, r.config);
    ok.predicted.push_back(e.time_s);
    ok.predicted_compute.push_back(e.compute_s);
    ok.measured.push_back(r.time_s);
    const PredictedRange range = predicted_range(job, m, r.config);
    ok.low.push_back(range.low), ok.high.push_back(range.high);
    if (m.switch_groups.nodes_per_group > 0) ok.crossing.push_back(crosses_switch_groups(m, r.config));
  }
  ok.range_basis = range_basis(m);
  return ok;
}

json summary_json(const OkRuns& ok) {
  if (ok.runs.empty()) return {{"n", 0}};
  json j = scores_json(score(ok.predicted, ok.measured), ok.keys);
  j["range_coverage"] = coverage_json(ok, ok.low, ok.high);
  if (!ok.crossing.empty()) {
    const long k = std::count(ok.crossing.begin(), ok.crossing.end(), true);
    j["switch_group_crossing"] = {{"crossing", k}, {"n", ok.crossing.size()}, {"share", double(k) / double(ok.crossing.size())}};
  }
  if (paced(ok.runs)) {
    j["comm_mape"] = comm_mape_json(ok, ok.predicted, ok.predicted_compute, all_of(ok));
    double lo = 1, hi = 0;
    for (const auto& r : ok.runs) {
      double share = comm_share(r.time_s, *r.device_s);
      lo = std::min(lo, share), hi = std::max(hi, share);
    }
    j["comm_share_range"] = {lo, hi};
  }
  return j;
}

json out_of_sample_json(const Job& job, const MachineProfile& m, const OkRuns& ok) {
  if (ok.runs.size() < 4)
    return {{"skipped", "needs at least 4 successful runs (2 to fit, 2 to score, each way); have " +
                            std::to_string(ok.runs.size())}};
  OutOfSample o = out_of_sample(job, m, ok.runs, ok.keys);
  // Each run priced by the fit of the half it was not in, time and compute,
  // for the communication part's score.
  std::vector<double> cross_time(ok.runs.size()), cross_compute(ok.runs.size());
  std::vector<double> cross_low(ok.runs.size()), cross_high(ok.runs.size());
  for (const HalfScore& h : o.halves) {
    MachineProfile fitted = apply_factors(m, h.fit.factors);
    for (size_t i : h.scored_on) {
      const PredictedRange range = predicted_range(job, fitted, ok.runs[i].config);
      cross_low[i] = range.low, cross_high[i] = range.high;
      if (!paced(ok.runs)) continue;
      Estimate e = predict_estimate(job, fitted, ok.runs[i].config);
      cross_time[i] = e.time_s, cross_compute[i] = e.compute_s;
    }
  }
  json parts = json::array();
  for (const HalfScore& h : o.halves) {
    std::vector<std::string> fit_keys, scored_keys;
    for (size_t i : h.fit_on) fit_keys.push_back(ok.keys[i]);
    for (size_t i : h.scored_on) scored_keys.push_back(ok.keys[i]);
    json part = fit_json(h.fit);  // factors, held, in-sample error of the half fitted
    part["fit_on"] = fit_keys;
    part["scored_on"] = scored_keys;
    part["raw"] = scores_json(h.raw, scored_keys);
    part["fitted"] = scores_json(h.fitted, scored_keys);
    if (paced(ok.runs)) {
      part["raw"]["comm_mape"] = comm_mape_json(ok, ok.predicted, ok.predicted_compute, h.scored_on);
      part["fitted"]["comm_mape"] = comm_mape_json(ok, cross_time, cross_compute, h.scored_on);
    }
    parts.push_back(part);
  }
  json pooled = {{"raw", scores_json(o.pooled_raw, ok.keys)}, {"fitted", scores_json(o.pooled_fitted, ok.keys)}};
  pooled["fitted"]["range_coverage"] = coverage_json(ok, cross_low, cross_high);
  if (paced(ok.runs)) {
    pooled["raw"]["comm_mape"] = comm_mape_json(ok, ok.predicted, ok.predicted_compute, all_of(ok));
    pooled["fitted"]["comm_mape"] = comm_mape_json(ok, cross_time, cross_compute, all_of(ok));
  }
  return {{"method", "runs sorted by configuration key, alternately into halves A and B; fit on A, score on B, and "
                     "B on A; 'pooled' scores every run under the fit of the other half"},
          {"halves", parts},
          {"pooled", pooled}};
}

void write_validation_plot(const std::string& path, const Job& job, const MachineProfile& machine, const OkRuns& ok,
                           const json& placement) {
  const std::string top_pick = placement.value("top_pick", ""), counterpart = placement.value("counterpart", "");
  std::vector<ScatterPoint> pts;
  std::vector<size_t> idx;
  for (size_t i = 0; i < ok.runs.size(); ++i) {
    Prediction pr = predict(job, machine, ok.runs[i].config);
    int heavy = int(std::max_element(pr.estimate.comm_s.begin(), pr.estimate.comm_s.end()) - pr.estimate.comm_s.begin());
    const Axis heavy_axis = kAxes[heavy];
    std::string mark = ok.keys[i] == top_pick      ? "top pick"
                       : ok.keys[i] == counterpart ? "across nodes"
                                                   : "";
    pts.push_back({ok.keys[i], ok.predicted[i], ok.measured[i], heavy_axis, pr.links[heavy].across, mark});
    idx.push_back(i);
  }
  std::sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return ok.measured[a] < ok.measured[b]; });
  std::vector<PairedBreakdown> top;
  for (size_t k = 0; k < idx.size() && k < 6; ++k) {
    const MeasuredRun& r = ok.runs[idx[k]];
    Estimate e = predict_estimate(job, machine, r.config);
    std::string rank = "#";  // built by appends: GCC 12 misreads "#" + std::string (-Wrestrict)
    rank += std::to_string(k + 1) + " " + ok.keys[idx[k]];
    top.push_back({rank, breakdown_parts(e.compute_s, engine_blocked_s(e)), breakdown_parts(r.compute_s, r.comm_s)});
  }
  // Short enough for the picture's width: the report holds the rest.
  std::string sub = std::to_string(ok.runs.size()) + " configurations";
  if (!ok.runs.empty()) {
    Scores sc = score(ok.predicted, ok.measured);
    // From the runs, not --repeats: a resumed report may hold other counts.
    auto [few, most] = std::minmax_element(ok.repeats_ok.begin(), ok.repeats_ok.end());
    if (*most > 1) {
      std::string counts = std::to_string(*most);
      if (*few != *most) counts = std::to_string(*few) + "–" + counts;
      sub += " (median of " + counts + " runs each)";
    }
    sub += ", no refit: MAPE " + fixed(100 * sc.mape, 1) + "%, Spearman " + fixed(sc.spearman, 2) + ", regret " +
           fixed(100 * sc.regret.value, 1) + "%";
  }
  write_file_atomic(path, validation_svg(pts, top,
                                           job.model.name + " on " + std::to_string(job.gpus) + " ranks, " +
                                               machine.name + ": predicted vs measured time per step",
                                           sub));
}

}  // namespace ff::advisor
