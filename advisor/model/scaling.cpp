#include "advisor/model/scaling.hpp"

#include <cctype>
#include <utility>

namespace ff {

double days_to_train(const ScalingPoint& p) { return p.train_tokens / p.tokens_per_s / 86400; }

double gpu_hours(const ScalingPoint& p) { return p.train_tokens / p.tokens_per_s / 3600 * double(p.gpus); }

double scaling_efficiency(const ScalingPoint& base, const ScalingPoint& p) {
  auto per_gpu = [](const ScalingPoint& q) { return q.model_flops / (q.time_s * double(q.gpus)); };
  return per_gpu(p) / per_gpu(base);
}

std::string grid_shape(const Grid& g) {
  int lead = -1;  // the largest model-parallel axis; none with data alone
  for (Axis a : kAxes)
    if (a != Axis::D && g.size(a) > 1 && (lead < 0 || g.size(a) > g.size(Axis(lead)))) lead = int(a);
  std::string s;
  for (Axis a : kAxes)
    if (g.size(a) > 1) s += int(a) == lead ? char(std::toupper(axis_letter(a))) : axis_letter(a);
  return s.empty() ? "-" : s;
}

namespace {

// The index of the best point that `fits`, by (primary, secondary) ascending; -1 if none.
template <class Fits, class Key>
int best_within(const std::vector<ScalingPoint>& points, Fits fits, Key key) {
  int best = -1;
  for (int i = 0; i < int(points.size()); ++i)
    if (points[i].found && fits(points[i]) && (best < 0 || key(points[i]) < key(points[best]))) best = i;
  return best;
}

}  // namespace

int fewest_gpu_hours_within(const std::vector<ScalingPoint>& points, double days) {
  return best_within(
      points, [&](const ScalingPoint& p) { return days_to_train(p) <= days; },
      [](const ScalingPoint& p) { return std::make_pair(gpu_hours(p), double(p.gpus)); });
}

int soonest_within_gpu_hours(const std::vector<ScalingPoint>& points, double hours) {
  return best_within(
      points, [&](const ScalingPoint& p) { return gpu_hours(p) <= hours; },
      [](const ScalingPoint& p) { return std::make_pair(days_to_train(p), gpu_hours(p)); });
}

}  // namespace ff
