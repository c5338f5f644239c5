#pragma once
// How good the model is (MODEL.md §8): predicted against measured iteration
// time over configurations of one job. Pure functions of two equal-length
// vectors; undefined values are NaN (the JSON edge writes them as null).
#include <array>
#include <cstddef>
#include <string>
#include <vector>

#include "advisor/core/grid.hpp"

namespace ff {

// Mean of |predicted − measured| / measured.
double mape(const std::vector<double>& predicted, const std::vector<double>& measured);
// 1-based ranks, ties sharing the mean of the ranks they span.
std::vector<double> average_ranks(const std::vector<double>& v);
// Pearson correlation of the average ranks; NaN below 2 values or when
// either side is constant.
double spearman(const std::vector<double>& a, const std::vector<double>& b);
// Kendall's tau-b (ties on either side corrected); NaN as spearman.
double kendall_tau_b(const std::vector<double>& a, const std::vector<double>& b);

// The recommendation's cost: the configuration predicted fastest (the first
// on a tie), measured, against the measured fastest.
struct Regret {
  size_t top_pick = 0, measured_best = 0;  // indices
  double value = 0;                        // measured[top_pick] / measured[measured_best] − 1
};
Regret regret(const std::vector<double>& predicted, const std::vector<double>& measured);

struct Scores {
  size_t n = 0;
  double mape = 0, spearman = 0, kendall = 0;
  Regret regret;
};
// All four; throws InputError on unequal lengths, no values, or a
// non-positive measured time.
Scores score(const std::vector<double>& predicted, const std::vector<double>& measured);

// The communication part of a step (MODEL.md §11): on the paced device compute
// is known by construction, so the step's error is scored without it too,
// MAPE of (measured time − measured device time) against (predicted time −
// predicted compute). Otherwise a slow pace dilutes the error under compute
// and meets any target. NaN for no runs or a measured part that is not
// positive (a step no longer than its device time has nothing to score);
// throws InputError on unequal lengths.
double comm_mape(const std::vector<double>& predicted_time, const std::vector<double>& predicted_compute,
                 const std::vector<double>& measured_time, const std::vector<double>& measured_device);
// The share of a step that is not device time, 1 − device / time: where a
// paced validation's configurations lie (MODEL.md §11 asks for 20–80%).
double comm_share(double measured_time, double measured_device);

// Two halves for out-of-sample scoring, decided by the keys alone: indices
// sorted by key, alternately to half 0 and half 1. Equal keys keep input order.
std::array<std::vector<size_t>, 2> split_halves(const std::vector<std::string>& keys);

// --- repeats: one configuration run several times ---------------------------

// What one run of a configuration measured, per step.
struct StepTimes {
  double time_s = 0, compute_s = 0;
  PerAxis<double> comm_s{};
};
// The repeats of one configuration as one: each quantity the median over the
// repeats on its own (so the parts need not add up to the time), and how far
// the repeats' times lie apart.
struct RepeatSummary {
  StepTimes median;
  double min_s = 0, max_s = 0;
  double relative_spread = 0;  // (max − min) / median time; 0 for one repeat
  size_t n = 0;
};
// Throws InputError for no repeats or a time per step that is not positive.
RepeatSummary summarize_repeats(const std::vector<StepTimes>& repeats);

// Repeat numbers 1…`repeats` not among `finished`, ascending: what a resumed
// validation still has to run. Finished numbers above `repeats` are kept by
// the caller, not run again.
std::vector<int> missing_repeats(const std::vector<int>& finished, int repeats);

// The runs of a sample that must be in it: `forced` (indices into an order of
// n candidates, each at most once) in the first `max` of that order. A forced
// index the first `max` leave out goes in at the front (the first of
// `forced`) or right after the one before it in `forced`; the non-forced
// candidates at the tail make room, so the sample keeps `max` entries (or
// forced.size(), when more). The result is the order with those moves, and
// for a larger `max` a superset: a resumed, wider validation extends a
// narrower one.
std::vector<size_t> sample_with(size_t n, size_t max, const std::vector<size_t>& forced);

}  // namespace ff
