#pragma once
// Pictures for people: the time breakdown of the top configurations as SVG.
#include <array>
#include <string>
#include <vector>

#include "advisor/core/grid.hpp"

namespace ff {

// What the pictures stack: compute, then each axis' exposed communication,
// then pipeline idle and the offload's exposed host link (MODEL.md §9), in
// one palette so every picture reads alike.
inline constexpr int kBreakdownParts = 1 + kAxisCount + 2;
using BreakdownParts = std::array<double, kBreakdownParts>;
BreakdownParts breakdown_parts(double compute_s, const PerAxis<double>& comm_s, double idle_s = 0, double host_s = 0);
const char* part_name(int k);    // "compute", then axis_name, "pipeline idle", "host link"
const char* part_colour(int k);  // fill colour, "#rrggbb"

struct BreakdownBar {
  std::string label;                 // e.g. "#1  4,2,16,8 xyzd mb2 rc oar,ors,oag"
  double compute_s = 0;              // seconds per iteration
  PerAxis<double> exposed_s{};       // exposed communication per axis
  double memory_gib = 0;             // shown as text at the bar's end
  double idle_s = 0, host_s = 0;     // pipeline idle, offload's exposed host link
};

// A self-contained SVG document: one horizontal stacked bar per entry (top to
// bottom in the given order), segments compute, x, y, z, data with a legend,
// a time axis in seconds with nice round ticks, the title on top.
std::string breakdown_svg(const std::vector<BreakdownBar>& bars, const std::string& title);

}  // namespace ff
