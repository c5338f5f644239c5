#pragma once
// The picture of a scaling sweep (`advisor scaling --plot`): tokens/s against
// GPUs on log–log axes with the range as a band and each point's grid named,
// MFU on a linear right-hand axis, and below, each count's time per
// iteration split into its terms as shares.
//
// Coordinates, so a test can work them by hand: GPUs run left to right at
// kScalingDoublingPx per doubling from the smallest count, whose x is
// kScalingPlotLeft + kScalingDoublingPx / 2. In the upper panel, y = top +
// kScalingPlotH · (1 − f), f the tokens/s value's place on a LogAxis from the
// smallest band edge to the largest (and MFU's on 0 to the next 10% above
// the largest); top is kScalingPlotTop.
#include <string>
#include <vector>

#include "advisor/output/report_svg.hpp"

namespace ff {

inline constexpr double kScalingPlotLeft = 96, kScalingPlotTop = 100, kScalingPlotH = 280;
inline constexpr double kScalingDoublingPx = 84;
inline constexpr double kScalingShareTop = kScalingPlotTop + kScalingPlotH + 110, kScalingShareH = 160;

struct ScalingPlotPoint {
  long long gpus = 0;
  bool found = false;  // false: drawn as a gap, marked "none" on the axis
  double tokens_per_s = 0, tokens_per_s_low = 0, tokens_per_s_high = 0;
  double mfu = 0;          // a fraction
  std::string label;       // the grid, e.g. "1,8,16,8 p2"
  std::string model;       // where each count has its own model: named above the grid
  BreakdownParts parts{};  // seconds per iteration of each term
};

// A self-contained SVG document; `band_note` says what the band is.
std::string scaling_svg(const std::vector<ScalingPlotPoint>& points, const std::string& title,
                        const std::string& band_note);

}  // namespace ff
