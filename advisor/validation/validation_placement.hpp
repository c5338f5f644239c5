#pragma once
// The placement check of a validation: the advisor's top pick keeps its
// heaviest traffic inside a node; does it beat the same configuration with
// that traffic sent across nodes, predicted and measured? One pair, chosen
// from predictions alone, so it can be planned before anything runs.
#include <array>
#include <string>
#include <vector>

#include "advisor/model/cost_model.hpp"

namespace ff {

struct PlacementCheck {
  Config top_pick;              // the predicted fastest of the candidates (the first on a tie)
  double top_pick_s = 0;        // predicted time per step
  Axis heavy_axis = Axis::X;    // the most bytes per step (the first on a tie)
  double heavy_bytes = 0;
  bool heavy_inside = false;    // every group of the heavy axis within one node
  bool has_counterpart = false;
  Config counterpart;           // the top pick under another order, heavy axis across nodes
  double counterpart_s = 0;
  std::string not_applicable;   // why there is no counterpart; empty when there is
};

// The heavy axis is chosen by bytes, not time: its time already depends on
// the placement being judged. The counterpart is the predicted fastest of the
// top pick's other placement orders (distinct_orders) under which some group
// of the heavy axis spans nodes. Throws InputError for no candidates.
PlacementCheck placement_check(const Job& job, const MachineProfile& p, const std::vector<Config>& candidates);

}  // namespace ff
