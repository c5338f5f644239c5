#include "advisor/validation/validation_placement.hpp"

#include "advisor/model/prediction.hpp"

#include <algorithm>

#include "advisor/core/error.hpp"

namespace ff {

PlacementCheck placement_check(const Job& job, const MachineProfile& p, const std::vector<Config>& candidates) {
  if (candidates.empty()) input_error("no configurations to pick from");
  PlacementCheck pc;
  Prediction top;
  for (size_t i = 0; i < candidates.size(); ++i) {
    Prediction pr = predict(job, p, candidates[i]);
    if (i == 0 || pr.estimate.time_s < top.estimate.time_s) top = std::move(pr);
  }
  pc.top_pick = top.config;
  pc.top_pick_s = top.estimate.time_s;
  PerAxis<double> bytes = bytes_per_step(top.plan);
  size_t heavy = size_t(std::max_element(bytes.begin(), bytes.end()) - bytes.begin());
  pc.heavy_axis = kAxes[heavy];
  pc.heavy_bytes = bytes[heavy];
  const AxisLink& link = top.links[heavy];
  pc.heavy_inside = link.inside && !link.across;
  const std::string name = axis_name(pc.heavy_axis);
  if (!(pc.heavy_bytes > 0)) {
    pc.not_applicable = "the top pick communicates nothing";
    return pc;
  }
  if (!pc.heavy_inside) {
    pc.not_applicable = "the top pick's heaviest axis, " + name +
                        ", already crosses nodes: no placement keeps it inside to compare";
    return pc;
  }
  const Order own = canonical_order(pc.top_pick.grid, pc.top_pick.order);
  bool filtered = false;  // a counterpart exists, but the filters (--order) leave it out
  for (const Order& o : distinct_orders(pc.top_pick.grid)) {
    if (o == own) continue;
    Config c = pc.top_pick;
    c.order = o;
    Prediction pr = predict(job, p, c);
    if (!pr.links[heavy].across) continue;
    if (std::find(candidates.begin(), candidates.end(), c) == candidates.end()) {
      filtered = true;
      continue;
    }
    if (!pc.has_counterpart || pr.estimate.time_s < pc.counterpart_s) {
      pc.has_counterpart = true;
      pc.counterpart = c;
      pc.counterpart_s = pr.estimate.time_s;
    }
  }
  if (!pc.has_counterpart)
    pc.not_applicable = filtered ? "the placements that send the heaviest axis, " + name +
                                       ", across nodes are filtered out (--order)"
                        : job.gpus <= p.gpus_per_node
                            ? "all " + std::to_string(job.gpus) + " ranks are on one node (" +
                                  std::to_string(p.gpus_per_node) + " per node): no placement crosses nodes"
                            : "no placement order of grid " + pc.top_pick.grid.str() + " sends the heaviest axis, " +
                                  name + ", across nodes (" + std::to_string(p.gpus_per_node) + " ranks per node)";
  return pc;
}

}  // namespace ff
