#include "groups.hpp"

#include <cstdio>
#include <sstream>

#include "check.hpp"
#include "grid.hpp"

namespace meas {

std::string geometry_name(const ff::Geometry& g) {
  if (g.inter) return "inter " + std::to_string(g.groups_per_node) + " groups/node size " + std::to_string(g.size);
  return "intra stride " + std::to_string(g.stride) + " size " + std::to_string(g.size);
}

std::string geometry_problem(const ff::Geometry& g, int ranks, int per_node) {
  std::string what = geometry_name(g) + ": ";
  std::string have = "this run has " + std::to_string(ranks) + " ranks, " + std::to_string(per_node) +
                     " per node (see --gpus-per-node)";
  if (g.size < 2) return what + "a group needs at least 2 ranks";
  if (!g.inter) {
    if (g.stride < 1) return what + "stride must be at least 1";
    if (g.stride * g.size > per_node)
      return what + "needs " + std::to_string(g.stride * g.size) + " ranks on one node; " + have;
    return "";
  }
  int nodes = ranks / per_node;
  if (g.groups_per_node < 1 || g.groups_per_node > per_node)
    return what + "groups per node must be between 1 and the ranks per node; " + have;
  if (g.size > nodes) return what + "needs " + std::to_string(g.size) + " nodes; " + have + ", so " +
                             std::to_string(nodes) + " node" + (nodes == 1 ? "" : "s");
  return "";
}

std::vector<std::vector<int>> geometry_groups(const ff::Geometry& g, int ranks, int per_node) {
  std::vector<std::vector<int>> groups;
  const ff::Order xyzd;
  int nodes = ranks / per_node;
  if (!g.inter) {
    // One node's tiled ranks are the grid (x = stride, y = size, z = blocks);
    // its y-axis groups are the geometry's groups, shifted to each node.
    int s = int(g.stride), blocks = per_node / (s * g.size);
    auto local = ff::groups_of(ff::Grid{s, g.size, blocks, 1}, xyzd, ff::Axis::Y);
    for (int node = 0; node < nodes; ++node)
      for (const auto& l : local) {
        std::vector<int> group;
        for (long long r : l) group.push_back(node * per_node + int(r));
        groups.push_back(group);
      }
    return groups;
  }
  // Ranks as the grid (x = local rank, y = node within a block of `size`
  // nodes, z = block): the y-axis groups of local ranks below c.
  int blocks = nodes / g.size;
  for (const auto& l : ff::groups_of(ff::Grid{per_node, g.size, blocks, 1}, xyzd, ff::Axis::Y))
    if (l[0] % per_node < g.groups_per_node) groups.emplace_back(l.begin(), l.end());
  return groups;
}

std::vector<ff::Geometry> default_geometries(int ranks, int per_node) {
  std::vector<ff::Geometry> out;
  for (int s = 1; 2 * s <= per_node; ++s)
    for (int size = 2; s * size <= per_node; ++size) out.push_back(ff::Geometry{false, s, size, 1});
  int nodes = ranks / per_node;
  std::vector<int> sizes;
  for (int size = 2; size <= nodes; size *= 2) sizes.push_back(size);
  if (nodes >= 2 && sizes.back() != nodes) sizes.push_back(nodes);
  for (int size : sizes)
    for (int c = 1; c <= per_node; ++c) out.push_back(ff::Geometry{true, per_node, size, c});
  return out;
}

std::vector<std::pair<int, int>> parse_pairs(const std::string& flag, const std::string& text, const std::string& form) {
  std::vector<std::pair<int, int>> pairs;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    int a = 0, b = 0;
    char x = 0, extra = 0;
    if (std::sscanf(item.c_str(), "%d%c%d%c", &a, &x, &b, &extra) != 3 || x != 'x' || a < 1 || b < 1)
      throw UsageError(flag + " '" + text + "': '" + item + "' is not " + form);
    pairs.push_back({a, b});
  }
  if (pairs.empty() || text.back() == ',') throw UsageError(flag + " '" + text + "': expected " + form);
  return pairs;
}

std::vector<ff::Geometry> parse_geometries(const std::string& text, bool inter) {
  std::vector<ff::Geometry> out;
  if (text == "none") return out;
  if (inter)
    for (auto [c, size] : parse_pairs("--inter", text, "GROUPS_PER_NODExSIZE, e.g. 2x2"))
      out.push_back(ff::Geometry{true, 1, size, c});
  else
    for (auto [stride, size] : parse_pairs("--intra", text, "STRIDExSIZE, e.g. 1x4,2x2"))
      out.push_back(ff::Geometry{false, stride, size, 1});
  return out;
}

}  // namespace meas
