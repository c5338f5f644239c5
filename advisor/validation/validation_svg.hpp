#pragma once
// The picture of a validation: predicted against measured time per step
// (log–log, the diagonal is a perfect model) and, for the fastest measured
// configurations, the breakdown predicted next to measured.
#include <array>
#include <string>
#include <vector>

#include "advisor/output/report_svg.hpp"

namespace ff {

struct ScatterPoint {
  std::string label;
  double predicted_s = 0, measured_s = 0;
  Axis heaviest_axis = Axis::X;  // the most predicted communication
  bool crosses_nodes = false;  // that axis' groups span nodes (drawn hollow)
  std::string mark;            // non-empty: ringed and labelled with it (the placement check's pair)
};

struct PairedBreakdown {
  std::string label;
  // Seconds per step (breakdown_parts).
  BreakdownParts predicted{}, measured{};
};

// A self-contained SVG document.
std::string validation_svg(const std::vector<ScatterPoint>& points, const std::vector<PairedBreakdown>& top,
                           const std::string& title, const std::string& subtitle);

}  // namespace ff
