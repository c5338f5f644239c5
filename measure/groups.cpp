#include "measure/groups.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <sstream>

#include "advisor/core/error.hpp"
#include "advisor/core/grid.hpp"
#include "engine/runtime/check.hpp"

namespace ff::measure {

std::string geometry_name(const ff::Geometry& g) {
  if (g.inter)
    return "inter " + std::to_string(g.groups_per_node) + " groups/node size " + std::to_string(g.size) +
           (g.members_per_node > 1 ? ", " + std::to_string(g.members_per_node) + " members/node" : "") +
           (g.node_stride > 1 ? ", nodes " + std::to_string(g.node_stride) + " apart" : "");
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
  if (g.node_stride < 1) return what + "node stride must be at least 1";
  if (g.node_stride > 1 && m != 1) return what + "nodes apart with one member a node only";
  int span = g.size / m, reach = span * g.node_stride;  // nodes a group spans, nodes its block takes
  if (reach > nodes) return what + "needs " + std::to_string(reach) + " nodes; " + have + ", so " +
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
  // Blocks of span·k nodes, k lanes each of the nodes k apart; on a lane's
  // nodes group j takes the same m local ranks.
  int m = g.members_per_node, span = g.size / m, k = g.node_stride;
  for (int first = 0; first + span * k <= nodes; first += span * k)
    for (int lane = first; lane < first + k; ++lane)
      for (int j = 0; j < g.groups_per_node; ++j) {
        std::vector<int> group;
        for (int t = 0; t < span; ++t)
          for (int l = j * m; l < j * m + m; ++l) group.push_back((lane + t * k) * per_node + l);
        groups.push_back(group);
      }
  std::sort(groups.begin(), groups.end());
  return groups;
}

std::vector<ff::Geometry> default_geometries(int ranks, int per_node, int nodes_per_group) {
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
  // An axis whose stride is a switch group's ranks or more puts each member
  // in another switch group: every group crosses, several a node share both
  // NICs and uplinks. (Its stride a multiple of the node's, one member a node.)
  const int k = nodes_per_group;
  if (k > 0)
    for (int span = 2; span * k <= nodes; span *= 2)
      for (int c = 1; c <= per_node; ++c) out.push_back(ff::Geometry{true, per_node, span, c, 1, k});
  return out;
}

namespace {

// Reads a positive integer at `p` and moves past it; false where there is none.
bool read_count(const char*& p, const char* end, int& v) {
  auto [next, ec] = std::from_chars(p, end, v);
  if (ec != std::errc() || v < 1) return false;
  p = next;
  return true;
}

// "AxB,…", or with `inter` also "AxBxC" and a suffix "sK" to either: positive
// integers, a missing C or K 1.
std::vector<std::array<int, 4>> parse_items(const std::string& flag, const std::string& text, const std::string& form,
                                            bool inter) {
  std::vector<std::array<int, 4>> items;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    std::array<int, 4> v{0, 0, 1, 1};
    const char *p = item.data(), *end = p + item.size();
    bool ok = read_count(p, end, v[0]) && p < end && *p++ == 'x' && read_count(p, end, v[1]);
    if (ok && inter && p < end && *p == 'x') ok = read_count(++p, end, v[2]);
    if (ok && inter && p < end && *p == 's') ok = read_count(++p, end, v[3]);
    if (!ok || p != end) throw InputError(flag + " '" + text + "': '" + item + "' is not " + form);
    items.push_back(v);
  }
  if (items.empty() || text.back() == ',') throw InputError(flag + " '" + text + "': expected " + form);
  return items;
}

}  // namespace

std::vector<std::pair<int, int>> parse_pairs(const std::string& flag, const std::string& text, const std::string& form) {
  std::vector<std::pair<int, int>> pairs;
  for (auto [a, b, unused, unused_k] : parse_items(flag, text, form, false)) pairs.push_back({a, b});
  return pairs;
}

std::vector<ff::Geometry> parse_geometries(const std::string& text, bool inter) {
  std::vector<ff::Geometry> out;
  if (text == "none") return out;
  if (inter)
    for (auto [c, size, m, k] : parse_items("--inter", text, "GROUPS_PER_NODExSIZE[xMEMBERS_PER_NODE][sNODE_STRIDE], e.g. 2x2, 1x8x2 or 2x2s2", true))
      out.push_back(ff::Geometry{true, 1, size, c, m, k});
  else
    for (auto [stride, size] : parse_pairs("--intra", text, "STRIDExSIZE, e.g. 1x4,2x2"))
      out.push_back(ff::Geometry{false, stride, size, 1});
  return out;
}

}  // namespace ff::measure
