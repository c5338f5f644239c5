#pragma once
// How sure is a ranking: the margin of each top configuration over the next,
// and whether its rank survives ±20% on each bandwidth tier and on GEMM
// efficiency.
//
// A ±20% change moves any configuration's time by at most a factor 1/0.8 up
// or 1/1.2 down, so only configurations within 1.5× of the top-k's time can
// change places with them: SearchResult::candidates holds exactly those, and
// re-pricing them is the whole answer, not an approximation.
#include <array>
#include <string>
#include <vector>

#include "advisor/model/search.hpp"

namespace ff {

struct Perturbation {
  Tier tier;
  double factor;
  std::string name() const;  // "inter-node bandwidth -20%"
};
const std::array<Perturbation, 6>& perturbations();

struct Confidence {
  double margin = 0;  // (next − this) / this; 0 for the last candidate
  std::array<int, 6> rank_under{};  // 1-based rank under each perturbation
  bool stable = true;               // the same rank under all of them
  std::string moved;                // e.g. "inter-20%: 3" (empty when stable)
};

// One entry per r.top.
std::vector<Confidence> assess(const Job& job, const MachineProfile& p, const SearchResult& r);

// One configuration's time per iteration under each perturbation: the least
// and the most. What the calibration's uncertainty does to a prediction,
// not a measured error.
struct TimeRange {
  double low = 0, high = 0;
};
TimeRange time_range(const Job& job, const MachineProfile& p, const Config& c);

}  // namespace ff
