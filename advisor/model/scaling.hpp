#pragma once
// How a job scales over GPU counts (`advisor scaling`, MODEL.md §14): each
// count's best configuration summarised, the efficiency against the
// smallest count, what training costs, the predicted range, where the best
// configuration changes shape, and the budgets' picks. Pure arithmetic over
// what the searches found.
#include <string>
#include <vector>

#include "advisor/core/grid.hpp"

namespace ff {

struct ScalingPoint {
  long long gpus = 0;
  bool found = false;          // false: nothing fits or divides at this count
  double time_s = 0;           // the best configuration's time per iteration
  double tokens_per_s = 0, mfu = 0;
  double model_flops = 0;      // per iteration (Narayanan et al.), for the efficiency
  double train_tokens = 0;     // what the days and GPU-hours are for
  // The range the best configuration's time is predicted within (MODEL.md §8, "Ranges").
  double time_low_s = 0, time_high_s = 0;
  Grid grid;
};

double days_to_train(const ScalingPoint& p);
double gpu_hours(const ScalingPoint& p);
// Model FLOP/s per GPU against the base's: T0·N0/(T·N) for one batch
// (strong scaling), T0/T when the batch grows with N (weak), and the ratio
// of MFUs in general.
double scaling_efficiency(const ScalingPoint& base, const ScalingPoint& p);

// Which axes the grid uses, in axis order, the largest model-parallel one
// (x, y, z or pipe; the first on a tie) in capitals: "xYd", "yZd", "yzPd";
// "d" for data alone and "-" for one GPU.
std::string grid_shape(const Grid& g);

// The budgets (-1: no count meets it). Deadline: of the counts that train
// within `days`, the one with the fewest GPU-hours (then fewer GPUs). GPU
// hours: of the counts within `hours`, the one that trains soonest (then
// fewer GPU-hours).
int fewest_gpu_hours_within(const std::vector<ScalingPoint>& points, double days);
int soonest_within_gpu_hours(const std::vector<ScalingPoint>& points, double hours);

}  // namespace ff
