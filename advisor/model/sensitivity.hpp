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

// The range a configuration's time is predicted within (MODEL.md §8,
// "Ranges"): priced with every kind of term at the profile's error in its
// favour, then against it (times ×(1 ∓ e): bandwidths divided, latencies
// multiplied); inter-node collectives at the wider error wherever a group
// spans more nodes than that error was checked at.
struct PredictedRange {
  double low = 0, high = 0;
  bool stated = false;          // the profile states its errors (else the defaults, assumed)
  bool beyond_checked = false;  // some group spans more nodes than checked
  double inter = 0;             // the inter-node error used
};
PredictedRange predicted_range(const Job& job, const MachineProfile& p, const Config& c);
// "compute ±6%, intra-node ±15%, inter-node ±12% (±21% beyond 256 nodes):
// the profile's stated errors"
std::string range_basis(const MachineProfile& p);

}  // namespace ff
