#include "advisor/model/scaling.hpp"

#include <cctype>

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

int fewest_gpu_hours_within(const std::vector<ScalingPoint>& points, double days) {
  int best = -1;
  for (int i = 0; i < int(points.size()); ++i) {
    const ScalingPoint& p = points[i];
    if (!p.found || days_to_train(p) > days) continue;
    if (best < 0 || gpu_hours(p) < gpu_hours(points[best]) ||
        (gpu_hours(p) == gpu_hours(points[best]) && p.gpus < points[best].gpus))
      best = i;
  }
  return best;
}

int soonest_within_gpu_hours(const std::vector<ScalingPoint>& points, double hours) {
  int best = -1;
  for (int i = 0; i < int(points.size()); ++i) {
    const ScalingPoint& p = points[i];
    if (!p.found || gpu_hours(p) > hours) continue;
    if (best < 0 || days_to_train(p) < days_to_train(points[best]) ||
        (days_to_train(p) == days_to_train(points[best]) && gpu_hours(p) < gpu_hours(points[best])))
      best = i;
  }
  return best;
}

}  // namespace ff
