#include "measure/groups.hpp"

#include <array>
#include <cstdio>
#include <sstream>

#include "advisor/core/error.hpp"
#include "advisor/core/grid.hpp"
#include "engine/runtime/check.hpp"

namespace ff::measure {

std::string geometry_name(const ff::Geometry& g) {
  if (g.inter)
    return "inter " + std::to_string(g.groups_per_node) + " groups/node size " + std::to_string(g.size) +
           (g.members_per_node > 1 ? ", " + std::to_string(g.members_per_node) + " members/node" : "");
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
  int nodes = ranks / per_node, m = g.members_per_node;
  if (m < 1) return what + "members per node must be at least 1";
  if (g.size % m != 0)
    return what + "size must be a multiple of the members per node (" + std::to_string(m) + "), the same on every node";
  if (g.size == m) return what + "all members on one node: that is an intra-node group (--intra)";
  if (g.groups_per_node < 1 || g.groups_per_node * m > per_node)
    return what + (m == 1 ? "groups per node must be between 1 and the ranks per node; "
                          : "groups per node times members per node must be between 1 and the ranks per node; ") +
           have;
  int span = g.size / m;  // nodes a group spans
  if (span > nodes) return what + "needs " + std::to_string(span) + " nodes; " + have + ", so " +
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
  // Blocks of size/m nodes; group j takes the same m local ranks on each.
  int m = g.members_per_node, span = g.size / m;
  for (int first = 0; first + span <= nodes; first += span)
    for (int j = 0; j < g.groups_per_node; ++j) {
      std::vector<int> group;
      for (int node = first; node < first + span; ++node)
        for (int l = j * m; l < j * m + m; ++l) group.push_back(node * per_node + l);
      groups.push_back(group);
    }
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
  for (int m = 2; m <= per_node; ++m)
    for (int span : sizes)
      for (int c = 1; c * m <= per_node; ++c) out.push_back(ff::Geometry{true, per_node, m * span, c, m});
  return out;
}

namespace {

// "AxB,…", or with `triples` also "AxBxC": positive integers, a missing third 1.
std::vector<std::array<int, 3>> parse_items(const std::string& flag, const std::string& text, const std::string& form,
                                            bool triples) {
  std::vector<std::array<int, 3>> items;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    int a = 0, b = 0, c = 1;
    char x = 0, y = 0, extra = 0;
    int n = std::sscanf(item.c_str(), "%d%c%d%c%d%c", &a, &x, &b, &y, &c, &extra);
    bool ok = (n == 3 || (triples && n == 5 && y == 'x')) && x == 'x' && a >= 1 && b >= 1 && c >= 1;
    if (!ok) throw InputError(flag + " '" + text + "': '" + item + "' is not " + form);
    items.push_back({a, b, c});
  }
  if (items.empty() || text.back() == ',') throw InputError(flag + " '" + text + "': expected " + form);
  return items;
}

}  // namespace

std::vector<std::pair<int, int>> parse_pairs(const std::string& flag, const std::string& text, const std::string& form) {
  std::vector<std::pair<int, int>> pairs;
  for (auto [a, b, unused] : parse_items(flag, text, form, false)) pairs.push_back({a, b});
  return pairs;
}

std::vector<ff::Geometry> parse_geometries(const std::string& text, bool inter) {
  std::vector<ff::Geometry> out;
  if (text == "none") return out;
  if (inter)
    for (auto [c, size, m] : parse_items("--inter", text, "GROUPS_PER_NODExSIZE[xMEMBERS_PER_NODE], e.g. 2x2 or 1x8x2", true))
      out.push_back(ff::Geometry{true, 1, size, c, m});
  else
    for (auto [stride, size] : parse_pairs("--intra", text, "STRIDExSIZE, e.g. 1x4,2x2"))
      out.push_back(ff::Geometry{false, stride, size, 1});
  return out;
}

}  // namespace ff::measure
