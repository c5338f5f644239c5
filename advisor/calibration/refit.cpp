#include "advisor/calibration/refit.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "advisor/calibration/least_squares.hpp"
#include "advisor/core/error.hpp"
#include "advisor/core/measurement.hpp"  // coll_from_name

namespace ff {

namespace {

bool is_log(Knob k) { return k != Knob::Overlap; }

// Residuals of one profile against the runs (see refit()'s comment). A
// component's residual is scaled by the measured step so a near-zero axis
// neither explodes nor vanishes; weight 1/2 keeps the step time in the lead.
// Each axis is compared with what the engine counts as blocked
// (engine_blocked_s: P with the bubble); against P's messages alone, a paced
// validation's pipelined runs blocked 13-140x the prediction, a residual no
// knob should chase (advisor/README.md).
std::vector<double> residuals(const Job& job, const MachineProfile& p, const std::vector<MeasuredRun>& runs) {
  constexpr double kComponentWeight = 0.7071067811865476;  // sqrt(1/2)
  std::vector<double> r;
  r.reserve(runs.size() * (2 + kAxisCount));
  for (const MeasuredRun& m : runs) {
    Estimate e = predict_estimate(job, p, m.config);
    r.push_back(std::log(e.time_s / m.time_s));
    r.push_back(kComponentWeight * (e.compute_s - m.compute_s) / m.time_s);
    const PerAxis<double> blocked = engine_blocked_s(e);
    for (int a = 0; a < kAxisCount; ++a) r.push_back(kComponentWeight * (blocked[a] - m.comm_s[a]) / m.time_s);
  }
  return r;
}

double rms_log_time(const Job& job, const MachineProfile& p, const std::vector<MeasuredRun>& runs) {
  double s = 0;
  for (const MeasuredRun& m : runs) {
    double l = std::log(predict_estimate(job, p, m.config).time_s / m.time_s);
    s += l * l;
  }
  return std::sqrt(s / double(runs.size()));
}

std::string held_reason(Knob k, const MachineProfile& base) {
  switch (k) {
    case Knob::IntraBw: return "no run's prediction depends on it (no group inside a node)";
    case Knob::InterBw: return "no run's prediction depends on it (no group crosses nodes)";
    case Knob::Alpha:
      return base.intra_default.alpha_s == 0 && base.inter_node.alpha_s == 0 ? "the profile's latencies are 0"
                                                                            : "no run's prediction depends on it";
    case Knob::Overlap: return "no run hides communication (no overlap flag with something to hide)";
    case Knob::Nonblocking: return "no run issues a collective non-blocking (no overlap flag with something to hide)";
    default: return "no run's prediction depends on it";
  }
}

// A point of the box and the objective there, as a minimiser leaves it.
struct Minimum {
  std::vector<double> x;
  double f;
};

// Nelder–Mead on a box: every point is clamped into [lo, hi] before it is
// evaluated, so the simplex slides along a bound instead of leaving it.
struct Box {
  std::vector<double> lo, hi;
  void clamp(std::vector<double>& x) const {
    for (size_t i = 0; i < x.size(); ++i) x[i] = std::clamp(x[i], lo[i], hi[i]);
  }
};

template <class F>
Minimum nelder_mead(F&& f, std::vector<double> x0, const std::vector<double>& step, const Box& box, int max_evals,
                    int& evals) {
  const size_t d = x0.size();
  std::vector<std::vector<double>> pts(d + 1, x0);
  std::vector<double> val(d + 1);
  auto eval = [&](std::vector<double>& x) {
    box.clamp(x);
    ++evals;
    return f(x);
  };
  for (size_t i = 0; i < d; ++i) {
    // Step towards the roomier side of the box.
    double s = x0[i] + step[i] <= box.hi[i] ? step[i] : -step[i];
    pts[i + 1][i] += s;
  }
  for (size_t i = 0; i <= d; ++i) val[i] = eval(pts[i]);
  int budget = max_evals;
  while (budget-- > 0) {
    std::vector<size_t> ord(d + 1);
    std::iota(ord.begin(), ord.end(), 0);
    std::sort(ord.begin(), ord.end(), [&](size_t a, size_t b) { return val[a] < val[b]; });
    size_t best = ord[0], worst = ord[d], second = ord[d - 1];
    double spread = 0;
    for (size_t i = 0; i <= d; ++i)
      for (size_t k = 0; k < d; ++k) spread = std::max(spread, std::abs(pts[i][k] - pts[best][k]));
    if (spread < 1e-7 || val[worst] - val[best] < 1e-14 * (1 + std::abs(val[best]))) break;
    std::vector<double> c(d, 0);
    for (size_t i = 0; i <= d; ++i)
      if (i != worst)
        for (size_t k = 0; k < d; ++k) c[k] += pts[i][k] / double(d);
    auto along = [&](double t) {
      std::vector<double> x(d);
      for (size_t k = 0; k < d; ++k) x[k] = c[k] + t * (pts[worst][k] - c[k]);
      return x;
    };
    std::vector<double> xr = along(-1);
    double fr = eval(xr);
    if (fr < val[best]) {
      std::vector<double> xe = along(-2);
      double fe = eval(xe);
      if (fe < fr) pts[worst] = xe, val[worst] = fe;
      else pts[worst] = xr, val[worst] = fr;
    } else if (fr < val[second]) {
      pts[worst] = xr, val[worst] = fr;
    } else {
      std::vector<double> xc = fr < val[worst] ? along(-0.5) : along(0.5);
      double fc = eval(xc);
      if (fc < std::min(fr, val[worst])) {
        pts[worst] = xc, val[worst] = fc;
      } else {
        for (size_t i = 0; i <= d; ++i) {
          if (i == best) continue;
          for (size_t k = 0; k < d; ++k) pts[i][k] = pts[best][k] + 0.5 * (pts[i][k] - pts[best][k]);
          val[i] = eval(pts[i]);
        }
      }
    }
  }
  size_t b = size_t(std::min_element(val.begin(), val.end()) - val.begin());
  return {pts[b], val[b]};
}

double sum_sq(const std::vector<double>& r) {
  double s = 0;
  for (double v : r) s += v * v;
  return s;
}

// Levenberg–Marquardt on a box: `res` gives the residuals whose sum of
// squares is minimised, the Jacobian comes from forward differences, a step
// is clamped into the box. Near a smooth minimum it converges in a few
// dozen evaluations where Nelder–Mead takes thousands; at a kink (a
// collective becoming fully hidden) it stops, and the caller's Nelder–Mead
// takes over.
template <class R>
Minimum levenberg_marquardt(R&& res, std::vector<double> x, const Box& box, int max_iters, int& evals) {
  const size_t d = x.size();
  box.clamp(x);
  std::vector<double> r = res(x);
  ++evals;
  double f = sum_sq(r), lambda = 1e-3;
  for (int it = 0; it < max_iters; ++it) {
    std::vector<std::vector<double>> jac(d);
    for (size_t i = 0; i < d; ++i) {
      std::vector<double> xh = x;
      double h = x[i] + 1e-6 <= box.hi[i] ? 1e-6 : -1e-6;
      xh[i] += h;
      std::vector<double> rh = res(xh);
      ++evals;
      for (size_t k = 0; k < r.size(); ++k) rh[k] = (rh[k] - r[k]) / h;
      jac[i] = std::move(rh);
    }
    std::vector<double> a(d * d), g(d);
    for (size_t i = 0; i < d; ++i) {
      for (size_t k = 0; k < r.size(); ++k) g[i] -= jac[i][k] * r[k];
      for (size_t j = 0; j <= i; ++j) {
        double s = 0;
        for (size_t k = 0; k < r.size(); ++k) s += jac[i][k] * jac[j][k];
        a[i * d + j] = a[j * d + i] = s;
      }
    }
    bool accepted = false;
    for (int tries = 0; tries < 12 && !accepted; ++tries) {
      std::vector<double> damped = a, step = g;
      for (size_t i = 0; i < d; ++i) damped[i * d + i] += lambda * (a[i * d + i] + 1e-12);
      if (!solve_spd(damped, step)) {
        lambda *= 10;
        continue;
      }
      std::vector<double> xn(d);
      for (size_t i = 0; i < d; ++i) xn[i] = x[i] + step[i];
      box.clamp(xn);
      std::vector<double> rn = res(xn);
      ++evals;
      double fn = sum_sq(rn);
      if (fn < f) {
        accepted = true;
        double gain = f - fn, moved = 0;
        for (size_t i = 0; i < d; ++i) moved = std::max(moved, std::abs(xn[i] - x[i]));
        x = std::move(xn), r = std::move(rn), f = fn;
        lambda = std::max(lambda / 3, 1e-12);
        if (gain <= 1e-12 * f || moved < 1e-9) return {x, f};
      } else {
        lambda *= 4;
      }
    }
    if (!accepted) break;
  }
  return {x, f};
}

}  // namespace

const char* knob_name(Knob k) {
  switch (k) {
    case Knob::IntraBw: return "intra_bw_scale";
    case Knob::InterBw: return "inter_bw_scale";
    case Knob::Alpha: return "alpha_scale";
    case Knob::Gemm: return "gemm_scale";
    case Knob::Elementwise: return "elementwise_scale";
    case Knob::Overlap: return "overlap_efficiency";
    case Knob::Nonblocking: return "nonblocking_slowdown_scale";
  }
  return "";
}

Factors identity_factors(const MachineProfile& base) {
  Factors f;
  f[Knob::Overlap] = base.overlap_efficiency;
  return f;
}

MachineProfile apply_factors(const MachineProfile& base, const Factors& f) {
  MachineProfile p = scaled(scaled(base, Tier::Intra, f[Knob::IntraBw]), Tier::Inter, f[Knob::InterBw]);
  scale_link(p.intra_default, 1, f[Knob::Alpha]);
  scale_link(p.inter_node, 1, f[Knob::Alpha]);
  for (auto& e : p.intra) scale_link(e.link, 1, f[Knob::Alpha]);
  for (auto& e : p.inter) scale_link(e.link, 1, f[Knob::Alpha]);
  p.switch_groups.alpha_s *= f[Knob::Alpha];
  p.peak_flops_bf16 *= f[Knob::Gemm];
  p.peak_flops_fp16 *= f[Knob::Gemm];
  p.peak_flops_fp32 *= f[Knob::Gemm];
  p.hbm_bandwidth *= f[Knob::Elementwise];
  p.overlap_efficiency = f[Knob::Overlap];
  p.nonblocking_slowdown = std::max(1.0, base.nonblocking_slowdown * f[Knob::Nonblocking]);
  return p;
}

bool paced(const std::vector<MeasuredRun>& runs) {
  return !runs.empty() && std::all_of(runs.begin(), runs.end(), [](const MeasuredRun& m) { return m.device_s.has_value(); });
}

RefitResult refit(const Job& job, const MachineProfile& base, const std::vector<MeasuredRun>& runs) {
  if (runs.empty()) input_error("no successful runs to fit to");
  for (const MeasuredRun& m : runs)
    if (!(m.time_s > 0)) input_error("a measured run has no positive time per step");
  RefitResult r;
  const Factors id = identity_factors(base);
  r.factors = id;
  const std::vector<double> r0 = residuals(job, base, runs);

  // A knob is fitted only if moving it (×2, or overlap to the other end)
  // moves some residual: otherwise the data cannot say what it is. On the
  // paced device compute is the pace by construction: its knobs stay at 1.
  const bool on_pace = paced(runs);
  std::vector<Knob> free;
  for (Knob k : kKnobs) {
    if (on_pace && (k == Knob::Gemm || k == Knob::Elementwise)) {
      r.held_because[size_t(k)] = "the paced device: compute is the pace by construction";
      continue;
    }
    Factors moved = id;
    moved[k] = is_log(k) ? 2 * id[k] : (id[k] < 0.5 ? 1.0 : 0.0);
    std::vector<double> r1 = residuals(job, apply_factors(base, moved), runs);
    double change = 0;
    for (size_t i = 0; i < r0.size(); ++i) change = std::max(change, std::abs(r1[i] - r0[i]));
    if (change > 1e-3) {
      free.push_back(k);
      r.fitted[size_t(k)] = true;
    } else {
      r.held_because[size_t(k)] = held_reason(k, base);
    }
  }

  // Coordinates: log of each scale in [1/100, 100], overlap as it is in [0, 1].
  // A faint pull towards the base (1e-8 per log-unit²) picks one answer
  // where two knobs trade off exactly (e.g. GEMM and element-wise speed when
  // every run has the same mix) without moving a well-determined fit.
  Box box;
  std::vector<double> x0, step;
  for (Knob k : free) {
    box.lo.push_back(is_log(k) ? std::log(0.01) : 0.0);
    box.hi.push_back(is_log(k) ? std::log(100.0) : 1.0);
    x0.push_back(is_log(k) ? 0.0 : id[k]);
    step.push_back(is_log(k) ? 0.5 : 0.25);
  }
  auto factors_at = [&](const std::vector<double>& x) {
    Factors f = id;
    for (size_t i = 0; i < free.size(); ++i) f[free[i]] = is_log(free[i]) ? std::exp(x[i]) : x[i];
    return f;
  };
  // The objective as residuals (its sum of squares), for Levenberg–Marquardt.
  const double per_run = 1 / std::sqrt(double(runs.size()));
  auto all_residuals = [&](const std::vector<double>& x) {
    std::vector<double> res = residuals(job, apply_factors(base, factors_at(x)), runs);
    for (double& v : res) v *= per_run;
    for (size_t i = 0; i < free.size(); ++i)
      if (is_log(free[i])) res.push_back(1e-4 * x[i]);
    return res;
  };
  auto objective = [&](const std::vector<double>& x) { return sum_sq(all_residuals(x)); };
  if (!free.empty()) {
    // Levenberg–Marquardt to the nearest minimum, then Nelder–Mead from
    // there until a round of it gains nothing: the model has kinks (min,
    // max) where a hidden collective becomes exposed or another group
    // becomes the slowest, which a simplex steps across and a gradient
    // does not; where Nelder–Mead found better, descend again from there.
    // Each minimiser starts from the best point so far and only ever
    // returns one at least as good.
    Minimum best = levenberg_marquardt(all_residuals, x0, box, 100, r.evaluations);
    for (int round = 0; round < 12; ++round) {
      Minimum nm = nelder_mead(objective, best.x, step, box, 400 * int(free.size()), r.evaluations);
      const bool stalled = best.f - nm.f <= 1e-10 * best.f;
      best = std::move(nm);
      if (stalled) break;
      best = levenberg_marquardt(all_residuals, best.x, box, 100, r.evaluations);
    }
    const std::vector<double>& x = best.x;
    r.factors = factors_at(x);
    for (size_t i = 0; i < free.size(); ++i)
      r.at_bound[size_t(free[i])] =
          is_log(free[i]) && (x[i] - box.lo[i] < 1e-6 || box.hi[i] - x[i] < 1e-6);
  }
  r.rms_before = rms_log_time(job, base, runs);
  r.rms_after = rms_log_time(job, apply_factors(base, r.factors), runs);
  return r;
}

OutOfSample out_of_sample(const Job& job, const MachineProfile& base, const std::vector<MeasuredRun>& runs,
                          const std::vector<std::string>& keys) {
  if (runs.size() != keys.size()) input_error("one key per run");
  if (runs.size() < 4)
    input_error("out-of-sample scoring needs at least 4 successful runs (2 to fit, 2 to score, each way); have " +
                std::to_string(runs.size()));
  OutOfSample o;
  std::vector<double> measured;
  for (const MeasuredRun& m : runs) {
    o.raw.push_back(predict_estimate(job, base, m.config).time_s);
    measured.push_back(m.time_s);
  }
  o.cross.resize(runs.size());
  auto pick = [](const std::vector<double>& v, const std::vector<size_t>& idx) {
    std::vector<double> out;
    for (size_t i : idx) out.push_back(v[i]);
    return out;
  };
  auto halves = split_halves(keys);
  for (int h = 0; h < 2; ++h) {
    HalfScore& hs = o.halves[h];
    hs.fit_on = halves[h];
    hs.scored_on = halves[1 - h];
    std::vector<MeasuredRun> fit_runs;
    for (size_t i : hs.fit_on) fit_runs.push_back(runs[i]);
    hs.fit = refit(job, base, fit_runs);
    MachineProfile fitted = apply_factors(base, hs.fit.factors);
    for (size_t i : hs.scored_on) o.cross[i] = predict_estimate(job, fitted, runs[i].config).time_s;
    std::vector<double> meas = pick(measured, hs.scored_on);
    hs.raw = score(pick(o.raw, hs.scored_on), meas);
    hs.fitted = score(pick(o.cross, hs.scored_on), meas);
  }
  o.pooled_raw = score(o.raw, measured);
  o.pooled_fitted = score(o.cross, measured);
  return o;
}

nlohmann::json fit_json(const RefitResult& r) {
  nlohmann::json factors = nlohmann::json::object(), held = nlohmann::json::object();
  nlohmann::json at_bound = nlohmann::json::array();
  for (Knob k : kKnobs) {
    factors[knob_name(k)] = r.factors[k];
    if (!r.fitted[size_t(k)]) held[knob_name(k)] = r.held_because[size_t(k)];
    if (r.at_bound[size_t(k)]) at_bound.push_back(knob_name(k));
  }
  return {{"factors", factors},
          {"held", held},
          {"at_bound", at_bound},
          {"rms_log_time_error", {{"before", r.rms_before}, {"after", r.rms_after}}}};
}

nlohmann::json fitted_profile_json(const nlohmann::json& base, const RefitResult& r, const std::string& name,
                                   const nlohmann::json& source) {
  nlohmann::json j = base;
  const Factors& f = r.factors;
  auto scale = [](nlohmann::json& obj, const char* key, double by) {
    if (obj.contains(key) && obj[key].is_number()) obj[key] = obj[key].get<double>() * by;
  };
  auto mark = [&](nlohmann::json& section, Knob k) {
    if (!r.fitted[size_t(k)]) return;
    if (section.contains("source")) section["base_source"] = section["source"];
    section["kind"] = "fitted";
    section["source"] = std::string("refitted to measured training runs (") + knob_name(k) + "); see \"fitted\"";
  };
  // A measured curve's times as the advisor scales them.
  auto scale_curve = [](nlohmann::json& op, const std::string& name, int g, double bw, double alpha) {
    Coll c;
    if (!op.contains("curve") || !op.contains("alpha_us") || !coll_from_name(name, c)) return;
    const double latency_us = op["alpha_us"].get<double>() * ring_steps(c, g);
    for (auto& point : op["curve"]) point[1] = scaled_curve_time(point[1].get<double>(), latency_us, alpha, bw);
  };
  // A link entry and its per-collective figures, alike.
  auto scale_link_json = [&](nlohmann::json& e, const char* bw_key, double bw, double alpha) {
    scale(e, bw_key, bw);
    for (const char* key : {"alpha_us", "ll_alpha_us", "call_us"}) scale(e, key, alpha);  // latencies, as scale_link
    for (const char* key : {"by_op", "nonblocking_by_op"})
      if (e.contains(key))
        for (auto it = e[key].begin(); it != e[key].end(); ++it) {
          if (e.contains("size")) scale_curve(*it, it.key(), e["size"].get<int>(), bw, alpha);
          scale(*it, "busbw_GBps", bw), scale(*it, "alpha_us", alpha);
        }
  };
  nlohmann::json& intra = j["intra_node"];
  scale_link_json(intra["default"], "busbw_GBps", f[Knob::IntraBw], f[Knob::Alpha]);
  for (auto& e : intra["table"]) scale_link_json(e, "busbw_GBps", f[Knob::IntraBw], f[Knob::Alpha]);
  mark(intra, Knob::IntraBw);
  nlohmann::json& inter = j["inter_node"];
  scale_link_json(inter, "node_busbw_GBps", f[Knob::InterBw], f[Knob::Alpha]);
  if (inter.contains("table"))
    for (auto& e : inter["table"]) scale_link_json(e, "busbw_GBps", f[Knob::InterBw], f[Knob::Alpha]);
  mark(inter, Knob::InterBw);
  if (j.contains("switch_groups")) {  // the global link scales as the nodes' (apply_factors)
    scale(j["switch_groups"], "global_busbw_GBps", f[Knob::InterBw]);
    scale(j["switch_groups"], "alpha_us", f[Knob::Alpha]);
    mark(j["switch_groups"], Knob::InterBw);
  }
  scale(j["compute"]["peak_tflops"], "bf16", f[Knob::Gemm]);
  scale(j["compute"]["peak_tflops"], "fp32", f[Knob::Gemm]);
  mark(j["compute"], Knob::Gemm);
  scale(j["memory"], "hbm_GBps", f[Knob::Elementwise]);
  mark(j["memory"], Knob::Elementwise);
  j["overlap"]["efficiency"] = f[Knob::Overlap];
  j["overlap"]["nonblocking_slowdown"] =
      std::max(1.0, j["overlap"].value("nonblocking_slowdown", 1.0) * f[Knob::Nonblocking]);
  mark(j["overlap"], Knob::Overlap);
  mark(j["overlap"], Knob::Nonblocking);

  j["name"] = name;
  j["description"] = base.value("description", std::string()) +
                     " Refitted to measured training runs: bandwidths, latency, compute speed and overlap scaled as "
                     "\"fitted\" says (peak_tflops then means the effective rate, not the datasheet's).";
  j["fitted"] = fit_json(r);
  j["fitted"]["kind"] = "fitted";
  j["fitted"]["note"] = "rms_log_time_error is in sample (the runs fitted); advisor validate scores out of sample";
  j["fitted"]["source"] = source;
  return j;
}

}  // namespace ff
