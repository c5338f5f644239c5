#pragma once
// How good the model is (DESIGN §8): predicted against measured iteration
// time over configurations of one job. Pure functions of two equal-length
// vectors; undefined values are NaN (the JSON edge writes them as null).
#include <array>
#include <cstddef>
#include <string>
#include <vector>

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

// Two halves for out-of-sample scoring, decided by the keys alone: indices
// sorted by key, alternately to half 0 and half 1. Equal keys keep input order.
std::array<std::vector<size_t>, 2> split_halves(const std::vector<std::string>& keys);

}  // namespace ff
