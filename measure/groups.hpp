#pragma once
// Which ranks a collective geometry puts together. Ranks sit on nodes in
// blocks (rank r on node r / per_node), as MODEL.md §1 requires of a launch.
// A geometry is measured with all of its groups running at once, so that
// concurrent groups share links and NICs as they do in training; ranks that
// belong to no group (a node size the geometry does not tile) sit out.
#include <string>
#include <utility>
#include <vector>

#include "advisor/core/error.hpp"
#include "advisor/core/measurement.hpp"

namespace ff::measure {

// "intra stride 1 size 4", "inter 2 groups/node size 2", or with several
// members a node "inter 1 groups/node size 8, 2 members/node", with nodes
// apart "inter 2 groups/node size 2, nodes 2 apart".
std::string geometry_name(const ff::Geometry& g);

// Why `g` cannot run on `ranks` ranks with `per_node` a node, or "".
std::string geometry_problem(const ff::Geometry& g, int ranks, int per_node);

// Every group of the geometry, as world ranks in ring order, ordered by first
// rank. Intra (stride s, size g): each node's ranks are tiled by blocks of s·g
// consecutive ranks, each block holding s groups {b, b+s, …, b+(g−1)s}.
// Inter (c groups/node, size g, m members/node, nodes k apart): nodes are
// taken g/m · k at a time; in each such block, lane i < k holds the nodes
// i, i+k, …, and on a lane group j < c holds local ranks j·m … j·m+m−1 of
// every node, members in world-rank order.
std::vector<std::vector<int>> geometry_groups(const ff::Geometry& g, int ranks, int per_node);

// What `measure` sweeps by default on `ranks` ranks, `per_node` a node:
// intra every (stride, size) with size ≥ 2 and stride·size ≤ per_node — any
// of these can arise from some grid; inter every groups-per-node count
// 1…per_node with sizes the powers of two up to the node count, and the node
// count itself; then, for each m = 2…per_node members a node, sizes m × those
// node counts with 1…per_node/m groups a node (an MPI's all-gather and
// reduce-scatter send from every member of a node at once). With switch
// groups of `nodes_per_group` nodes (0: one switch), also one member a node
// with nodes that many apart, 1…per_node groups a node: every group leaves
// its switch group, as an axis strided over switch groups does.
std::vector<ff::Geometry> default_geometries(int ranks, int per_node, int nodes_per_group = 0);

// "AxB,CxD" → {(A, B), (C, D)}, positive integers; `flag` and `form` name
// the option and its format in the error. Throws InputError.
std::vector<std::pair<int, int>> parse_pairs(const std::string& flag, const std::string& text, const std::string& form);

// "1x4,2x2": for --intra, stride x size; for --inter, groups-per-node x size
// or groups-per-node x size x members-per-node, with "sK" after either for
// nodes K apart (its stride, the rank distance of members, is left for the
// caller to set); "none" is the empty list.
// Throws InputError.
std::vector<ff::Geometry> parse_geometries(const std::string& text, bool inter);

}  // namespace ff::measure
