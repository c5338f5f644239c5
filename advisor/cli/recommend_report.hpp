#pragma once
// recommend's answer for programs (MODEL.md §3) and its reasons when there is
// none: `advisor scaling` gives each GPU count exactly what `recommend` would.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "advisor/cli/job_options.hpp"
#include "advisor/model/search.hpp"
#include "advisor/model/sensitivity.hpp"

namespace ff::advisor {

// A range for programs: {low_s, high_s, stated, beyond_checked_nodes, basis}.
nlohmann::json range_json(const MachineProfile& m, const PredictedRange& r);

// Training tokens for the days: `tokens`, or 20 per parameter where 0.
double train_tokens(const Job& job, double tokens);

// The JSON `recommend --json` prints: the job, the search, and each of r.top
// with its confidence, range and launch lines; `rejected` with show_infeasible.
nlohmann::json recommend_json(const Job& job, const JobOptions& o, const MachineProfile& m, const SearchResult& r,
                              const std::vector<Confidence>& conf, const std::vector<PredictedRange>& ranges,
                              double tokens, bool show_infeasible);

// Why a search found nothing: no grid divides the job (`divisible` false,
// an input error), or nothing fits in memory (and what would).
struct NoAnswer {
  bool divisible = true;
  std::string message;
};
NoAnswer no_answer(const Job& job, const MachineProfile& m, const SearchResult& r, bool show_infeasible);

}  // namespace ff::advisor
