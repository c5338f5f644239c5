#include "advisor/validation/validation_stats.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "advisor/core/error.hpp"
#include "advisor/core/measurement.hpp"  // median

namespace ff {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

void same_length(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) input_error("predicted and measured lists differ in length");
}

int sign(double v) { return (v > 0) - (v < 0); }

}  // namespace

double mape(const std::vector<double>& p, const std::vector<double>& m) {
  same_length(p, m);
  if (m.empty()) return kNaN;
  double s = 0;
  for (size_t i = 0; i < m.size(); ++i) s += std::abs(p[i] - m[i]) / m[i];
  return s / double(m.size());
}

double comm_mape(const std::vector<double>& pt, const std::vector<double>& pc, const std::vector<double>& mt,
                 const std::vector<double>& md) {
  same_length(pt, pc);
  same_length(pt, mt);
  same_length(pt, md);
  std::vector<double> p, m;
  for (size_t i = 0; i < pt.size(); ++i) {
    if (!(mt[i] - md[i] > 0)) return kNaN;
    p.push_back(pt[i] - pc[i]);
    m.push_back(mt[i] - md[i]);
  }
  return mape(p, m);
}

double comm_share(double measured_time, double measured_device) { return 1 - measured_device / measured_time; }

std::vector<double> average_ranks(const std::vector<double>& v) {
  std::vector<size_t> idx(v.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
  std::vector<double> r(v.size());
  for (size_t i = 0; i < idx.size();) {
    size_t j = i;
    while (j + 1 < idx.size() && v[idx[j + 1]] == v[idx[i]]) ++j;
    double mean = (double(i) + double(j)) / 2 + 1;  // ranks i+1 … j+1
    for (size_t k = i; k <= j; ++k) r[idx[k]] = mean;
    i = j + 1;
  }
  return r;
}

double spearman(const std::vector<double>& a, const std::vector<double>& b) {
  same_length(a, b);
  if (a.size() < 2) return kNaN;
  std::vector<double> ra = average_ranks(a), rb = average_ranks(b);
  double n = double(a.size()), ma = (n + 1) / 2, mb = ma;  // mean rank, ties or not
  double sab = 0, saa = 0, sbb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    sab += (ra[i] - ma) * (rb[i] - mb);
    saa += (ra[i] - ma) * (ra[i] - ma);
    sbb += (rb[i] - mb) * (rb[i] - mb);
  }
  if (saa == 0 || sbb == 0) return kNaN;
  return sab / std::sqrt(saa * sbb);
}

double kendall_tau_b(const std::vector<double>& a, const std::vector<double>& b) {
  same_length(a, b);
  if (a.size() < 2) return kNaN;
  // O(n²): validation sets are tens to hundreds of runs.
  double concordant_minus_discordant = 0, untied_a = 0, untied_b = 0;
  for (size_t i = 0; i < a.size(); ++i)
    for (size_t j = i + 1; j < a.size(); ++j) {
      int sa = sign(a[i] - a[j]), sb = sign(b[i] - b[j]);
      concordant_minus_discordant += sa * sb;
      untied_a += sa != 0;
      untied_b += sb != 0;
    }
  if (untied_a == 0 || untied_b == 0) return kNaN;
  return concordant_minus_discordant / std::sqrt(untied_a * untied_b);
}

Regret regret(const std::vector<double>& p, const std::vector<double>& m) {
  same_length(p, m);
  if (m.empty()) input_error("regret of no configurations");
  Regret r;
  r.top_pick = size_t(std::min_element(p.begin(), p.end()) - p.begin());
  r.measured_best = size_t(std::min_element(m.begin(), m.end()) - m.begin());
  r.value = m[r.top_pick] / m[r.measured_best] - 1;
  return r;
}

Scores score(const std::vector<double>& p, const std::vector<double>& m) {
  same_length(p, m);
  if (m.empty()) input_error("no measured configurations to score");
  for (double x : m)
    if (!(x > 0)) input_error("a measured time is not positive");
  Scores s;
  s.n = m.size();
  s.mape = mape(p, m);
  s.spearman = spearman(p, m);
  s.kendall = kendall_tau_b(p, m);
  s.regret = regret(p, m);
  return s;
}

std::array<std::vector<size_t>, 2> split_halves(const std::vector<std::string>& keys) {
  std::vector<size_t> idx(keys.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return keys[a] < keys[b]; });
  std::array<std::vector<size_t>, 2> h;
  for (size_t i = 0; i < idx.size(); ++i) h[i % 2].push_back(idx[i]);
  return h;
}

RepeatSummary summarize_repeats(const std::vector<StepTimes>& repeats) {
  if (repeats.empty()) input_error("no successful repeats to summarize");
  std::vector<double> time, compute;
  PerAxis<std::vector<double>> comm;
  for (const StepTimes& r : repeats) {
    if (!(r.time_s > 0)) input_error("a repeat's time per step is not positive");
    time.push_back(r.time_s);
    compute.push_back(r.compute_s);
    for (int a = 0; a < kAxisCount; ++a) comm[a].push_back(r.comm_s[a]);
  }
  RepeatSummary s;
  s.n = repeats.size();
  s.median.time_s = median(time);
  s.median.compute_s = median(compute);
  for (int a = 0; a < kAxisCount; ++a) s.median.comm_s[a] = median(comm[a]);
  s.min_s = *std::min_element(time.begin(), time.end());
  s.max_s = *std::max_element(time.begin(), time.end());
  s.relative_spread = (s.max_s - s.min_s) / s.median.time_s;
  return s;
}

std::vector<int> missing_repeats(const std::vector<int>& finished, int repeats) {
  std::vector<int> out;
  for (int r = 1; r <= repeats; ++r)
    if (std::find(finished.begin(), finished.end(), r) == finished.end()) out.push_back(r);
  return out;
}

std::vector<size_t> sample_with(size_t n, size_t max, const std::vector<size_t>& forced) {
  auto is_forced = [&](size_t i) { return std::find(forced.begin(), forced.end(), i) != forced.end(); };
  for (size_t f : forced)
    if (f >= n) input_error("a forced configuration is not among the candidates");
  std::vector<size_t> out(std::min(n, max));
  std::iota(out.begin(), out.end(), 0);
  for (size_t k = 0; k < forced.size(); ++k) {
    if (std::find(out.begin(), out.end(), forced[k]) != out.end()) continue;
    auto at = k == 0 ? out.begin() : std::find(out.begin(), out.end(), forced[k - 1]) + 1;
    out.insert(at, forced[k]);
  }
  const size_t keep = std::max(max, forced.size());
  for (size_t i = out.size(); out.size() > keep && i-- > 0;)
    if (!is_forced(out[i])) out.erase(out.begin() + std::ptrdiff_t(i));
  return out;
}

}  // namespace ff
