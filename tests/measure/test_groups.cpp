// Which ranks each geometry puts together, against lists written out by
// hand: ranks sit on nodes in blocks (rank r on node r / per_node).
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "engine/runtime/check.hpp"
#include "measure/groups.hpp"

using Groups = std::vector<std::vector<int>>;
using ff::measure::geometry_groups;

namespace {
ff::Geometry intra(long long stride, int size) { return ff::Geometry{false, stride, size, 1}; }
ff::Geometry inter(int per_node_groups, int size) { return ff::Geometry{true, 1, size, per_node_groups}; }
ff::Geometry inter(int per_node_groups, int size, int members) {
  return ff::Geometry{true, 1, size, per_node_groups, members};
}
ff::Geometry apart(int per_node_groups, int size, int node_stride) {
  return ff::Geometry{true, 1, size, per_node_groups, 1, node_stride};
}
}  // namespace

TEST_CASE("intra-node groups, 8 ranks, 4 per node") {
  CHECK(geometry_groups(intra(1, 2), 8, 4) == Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}});
  CHECK(geometry_groups(intra(1, 4), 8, 4) == Groups{{0, 1, 2, 3}, {4, 5, 6, 7}});
  CHECK(geometry_groups(intra(2, 2), 8, 4) == Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}});
  // Size 3 tiles a node of 4 once; rank 3 of each node sits out.
  CHECK(geometry_groups(intra(1, 3), 8, 4) == Groups{{0, 1, 2}, {4, 5, 6}});
}

TEST_CASE("intra-node groups, 8 ranks on one node of 8") {
  CHECK(geometry_groups(intra(4, 2), 8, 8) == Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}});
  CHECK(geometry_groups(intra(2, 4), 8, 8) == Groups{{0, 2, 4, 6}, {1, 3, 5, 7}});
  CHECK(geometry_groups(intra(3, 2), 8, 8) == Groups{{0, 3}, {1, 4}, {2, 5}});
}

TEST_CASE("inter-node groups, 8 ranks, 4 per node") {
  CHECK(geometry_groups(inter(1, 2), 8, 4) == Groups{{0, 4}});
  CHECK(geometry_groups(inter(2, 2), 8, 4) == Groups{{0, 4}, {1, 5}});
  CHECK(geometry_groups(inter(4, 2), 8, 4) == Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}});
  CHECK(geometry_groups(inter(1, 4), 8, 2) == Groups{{0, 2, 4, 6}});
  CHECK(geometry_groups(inter(2, 2), 8, 2) == Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}});
}

TEST_CASE("inter-node groups with several members a node") {
  // 8 ranks, 2 a node (nodes {0,1} {2,3} {4,5} {6,7}).
  CHECK(geometry_groups(inter(1, 8, 2), 8, 2) == Groups{{0, 1, 2, 3, 4, 5, 6, 7}});
  CHECK(geometry_groups(inter(1, 4, 2), 8, 2) == Groups{{0, 1, 2, 3}, {4, 5, 6, 7}});
  // 16 ranks, 4 a node: groups on node pairs, group j on local ranks 2j, 2j+1.
  CHECK(geometry_groups(inter(2, 4, 2), 16, 4) == Groups{{0, 1, 4, 5}, {2, 3, 6, 7}, {8, 9, 12, 13}, {10, 11, 14, 15}});
  CHECK(geometry_groups(inter(1, 4, 2), 16, 4) == Groups{{0, 1, 4, 5}, {8, 9, 12, 13}});
  CHECK(geometry_groups(inter(1, 8, 2), 16, 4) == Groups{{0, 1, 4, 5, 8, 9, 12, 13}});
  CHECK(geometry_groups(inter(1, 8, 4), 16, 4) == Groups{{0, 1, 2, 3, 4, 5, 6, 7}, {8, 9, 10, 11, 12, 13, 14, 15}});
  // 12 ranks, 6 a node (2 nodes): 3 groups of 2 + 2, or 2 of 3 + 3.
  CHECK(geometry_groups(inter(3, 4, 2), 12, 6) == Groups{{0, 1, 6, 7}, {2, 3, 8, 9}, {4, 5, 10, 11}});
  CHECK(geometry_groups(inter(2, 6, 3), 12, 6) == Groups{{0, 1, 2, 6, 7, 8}, {3, 4, 5, 9, 10, 11}});
  // m = 1 is the one-member-a-node layout.
  CHECK(geometry_groups(inter(2, 2, 1), 8, 2) == geometry_groups(inter(2, 2), 8, 2));
}

TEST_CASE("inter-node groups on nodes apart") {
  // 4 nodes of 2 ({0,1} {2,3} {4,5} {6,7}), nodes 2 apart: lanes {0,2} and {1,3}.
  CHECK(geometry_groups(apart(1, 2, 2), 8, 2) == Groups{{0, 4}, {2, 6}});
  CHECK(geometry_groups(apart(2, 2, 2), 8, 2) == Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}});
  // 8 nodes of 1, nodes 2 apart, size 4: lanes {0,2,4,6} and {1,3,5,7}.
  CHECK(geometry_groups(apart(1, 4, 2), 8, 1) == Groups{{0, 2, 4, 6}, {1, 3, 5, 7}});
  // 8 nodes of 1, nodes 4 apart, size 2: four lanes.
  CHECK(geometry_groups(apart(1, 2, 4), 8, 1) == Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}});
  // 6 nodes of 1, nodes 2 apart, size 2: blocks of 4 nodes; nodes 4 and 5 sit out.
  CHECK(geometry_groups(apart(1, 2, 2), 6, 1) == Groups{{0, 2}, {1, 3}});
  // Nodes 1 apart is the consecutive layout.
  CHECK(geometry_groups(apart(2, 2, 1), 8, 2) == geometry_groups(inter(2, 2), 8, 2));
}

TEST_CASE("a node of 3 ranks (not a power of two)") {
  CHECK(geometry_groups(intra(1, 2), 6, 3) == Groups{{0, 1}, {3, 4}});
  CHECK(geometry_groups(intra(1, 3), 6, 3) == Groups{{0, 1, 2}, {3, 4, 5}});
  CHECK(geometry_groups(inter(1, 2), 6, 3) == Groups{{0, 3}});
  CHECK(geometry_groups(inter(2, 2), 6, 3) == Groups{{0, 3}, {1, 4}});
  CHECK(geometry_groups(inter(3, 2), 6, 3) == Groups{{0, 3}, {1, 4}, {2, 5}});
  // 4 nodes of 3: size 3 takes nodes 0–2, node 3 sits out; size 2 pairs nodes.
  CHECK(geometry_groups(inter(1, 3), 12, 3) == Groups{{0, 3, 6}});
  CHECK(geometry_groups(inter(2, 2), 12, 3) == Groups{{0, 3}, {1, 4}, {6, 9}, {7, 10}});
}

TEST_CASE("default geometries") {
  auto names = [](int ranks, int per_node) {
    std::vector<std::string> out;
    for (const auto& g : ff::measure::default_geometries(ranks, per_node)) out.push_back(ff::measure::geometry_name(g));
    return out;
  };
  CHECK(names(2, 2) == std::vector<std::string>{"intra stride 1 size 2"});
  CHECK(names(2, 1) == std::vector<std::string>{"inter 1 groups/node size 2"});
  // 2 nodes of 4: node counts {2}; then m = 2 (size 4, 1 or 2 groups), 3 (size 6), 4 (size 8).
  CHECK(names(8, 4) == std::vector<std::string>{
                           "intra stride 1 size 2", "intra stride 1 size 3", "intra stride 1 size 4",
                           "intra stride 2 size 2", "inter 1 groups/node size 2", "inter 2 groups/node size 2",
                           "inter 3 groups/node size 2", "inter 4 groups/node size 2",
                           "inter 1 groups/node size 4, 2 members/node", "inter 2 groups/node size 4, 2 members/node",
                           "inter 1 groups/node size 6, 3 members/node", "inter 1 groups/node size 8, 4 members/node"});
  CHECK(names(6, 3) == std::vector<std::string>{"intra stride 1 size 2", "intra stride 1 size 3",
                                                "inter 1 groups/node size 2", "inter 2 groups/node size 2",
                                                "inter 3 groups/node size 2",
                                                "inter 1 groups/node size 4, 2 members/node",
                                                "inter 1 groups/node size 6, 3 members/node"});
  // 4 nodes of 2 (the emulated cluster): node counts {2, 4}; m = 2 gives sizes 4 and 8.
  CHECK(names(8, 2) == std::vector<std::string>{"intra stride 1 size 2", "inter 1 groups/node size 2",
                                                "inter 2 groups/node size 2", "inter 1 groups/node size 4",
                                                "inter 2 groups/node size 4",
                                                "inter 1 groups/node size 4, 2 members/node",
                                                "inter 1 groups/node size 8, 2 members/node"});
  // 6 nodes of 1: sizes 2, 4 (powers of two) and 6 (all nodes).
  CHECK(names(6, 1) == std::vector<std::string>{"inter 1 groups/node size 2", "inter 1 groups/node size 4",
                                                "inter 1 groups/node size 6"});
  // Switch groups of 2 nodes: also pairs on nodes 2 apart, 1 and 2 a node.
  auto grouped = [](int ranks, int per_node, int nodes_per_group) {
    std::vector<std::string> out;
    for (const auto& g : ff::measure::default_geometries(ranks, per_node, nodes_per_group))
      out.push_back(ff::measure::geometry_name(g));
    return out;
  };
  auto with = names(8, 2);
  with.insert(with.end(), {"inter 1 groups/node size 2, nodes 2 apart", "inter 2 groups/node size 2, nodes 2 apart"});
  CHECK(grouped(8, 2, 2) == with);
  // 8 nodes of 1 in groups of 2: sizes 2 and 4 on nodes 2 apart; in groups of 4, size 2 on nodes 4 apart.
  auto eight = names(8, 1);
  CHECK(grouped(8, 1, 2).size() == eight.size() + 2);
  CHECK(grouped(8, 1, 2).back() == "inter 1 groups/node size 4, nodes 2 apart");
  CHECK(grouped(8, 1, 4).back() == "inter 1 groups/node size 2, nodes 4 apart");
  CHECK(grouped(8, 1, 4).size() == eight.size() + 1);
}

TEST_CASE("every default geometry's groups: disjoint, the right size, inside or across nodes as named") {
  for (auto [ranks, per_node] : {std::pair{8, 4}, {6, 3}, {12, 3}, {16, 8}, {24, 6}, {8, 1}, {8, 2}, {16, 4}})
    for (const auto& g : ff::measure::default_geometries(ranks, per_node, ranks / per_node % 2 == 0 ? 2 : 0)) {
      CAPTURE(ranks);
      CAPTURE(per_node);
      CAPTURE(ff::measure::geometry_name(g));
      auto groups = geometry_groups(g, ranks, per_node);
      REQUIRE(!groups.empty());
      std::vector<int> seen(size_t(ranks), 0), groups_on_node(size_t(ranks / per_node), 0);
      for (const auto& grp : groups) {
        CHECK(int(grp.size()) == g.size);
        std::vector<int> nodes;
        for (int r : grp) {
          ++seen[size_t(r)];
          nodes.push_back(r / per_node);
        }
        if (!g.inter) {
          for (size_t i = 1; i < grp.size(); ++i) CHECK(grp[i] - grp[i - 1] == g.stride);
          CHECK(nodes.front() == nodes.back());
        } else {
          // Nodes node_stride apart, m members on each, in world-rank order.
          for (size_t i = 1; i < grp.size(); ++i) CHECK(grp[i] > grp[i - 1]);
          for (size_t i = 0; i < nodes.size(); ++i)
            CHECK(nodes[i] == nodes.front() + int(i) / g.members_per_node * g.node_stride);
          for (size_t i = 0; i < nodes.size(); i += size_t(g.members_per_node)) ++groups_on_node[size_t(nodes[i])];
        }
      }
      for (int s : seen) CHECK(s <= 1);
      // Inter: every node in use holds exactly c groups' members.
      if (g.inter)
        for (int c : groups_on_node) CHECK((c == 0 || c == g.groups_per_node));
    }
}

TEST_CASE("a geometry the run is too small for is named with what it needs") {
  CHECK(ff::measure::geometry_problem(intra(1, 4), 8, 4) == "");
  CHECK(ff::measure::geometry_problem(intra(1, 4), 2, 2) ==
        "intra stride 1 size 4: needs 4 ranks on one node; this run has 2 ranks, 2 per node (see --gpus-per-node)");
  CHECK(ff::measure::geometry_problem(intra(2, 3), 12, 3).find("needs 6 ranks on one node") != std::string::npos);
  CHECK(ff::measure::geometry_problem(inter(1, 4), 8, 4).find("needs 4 nodes") != std::string::npos);
  CHECK(ff::measure::geometry_problem(inter(5, 2), 8, 4).find("groups per node must be between 1 and") != std::string::npos);
  // Several members a node: 8 ranks, 2 a node (4 nodes).
  CHECK(ff::measure::geometry_problem(inter(1, 8, 2), 8, 2) == "");
  CHECK(ff::measure::geometry_problem(inter(1, 4, 2), 8, 2) == "");
  CHECK(ff::measure::geometry_problem(inter(1, 5, 2), 8, 2) ==
        "inter 1 groups/node size 5, 2 members/node: size must be a multiple of the members per node (2), the same "
        "on every node");
  CHECK(ff::measure::geometry_problem(inter(2, 4, 2), 8, 2) ==
        "inter 2 groups/node size 4, 2 members/node: groups per node times members per node must be between 1 and "
        "the ranks per node; this run has 8 ranks, 2 per node (see --gpus-per-node)");
  CHECK(ff::measure::geometry_problem(inter(1, 4, 3), 8, 2).find("size must be a multiple") != std::string::npos);
  CHECK(ff::measure::geometry_problem(inter(1, 2, 2), 8, 2) ==
        "inter 1 groups/node size 2, 2 members/node: all members on one node: that is an intra-node group (--intra)");
  CHECK(ff::measure::geometry_problem(inter(1, 16, 2), 8, 2) ==
        "inter 1 groups/node size 16, 2 members/node: needs 8 nodes; this run has 8 ranks, 2 per node (see "
        "--gpus-per-node), so 4 nodes");
  CHECK(ff::measure::geometry_problem(inter(1, 4, 0), 8, 2).find("members per node must be at least 1") != std::string::npos);
  // Nodes apart: the block is size × stride nodes.
  CHECK(ff::measure::geometry_problem(apart(2, 2, 2), 8, 2) == "");
  CHECK(ff::measure::geometry_problem(apart(1, 4, 2), 8, 2) ==
        "inter 1 groups/node size 4, nodes 2 apart: needs 8 nodes; this run has 8 ranks, 2 per node (see "
        "--gpus-per-node), so 4 nodes");
  CHECK(ff::measure::geometry_problem(ff::Geometry{true, 1, 4, 1, 2, 2}, 16, 2) ==
        "inter 1 groups/node size 4, 2 members/node, nodes 2 apart: nodes apart with one member a node only");
  CHECK(ff::measure::geometry_problem(apart(1, 2, 0), 8, 2).find("node stride must be at least 1") != std::string::npos);
}

TEST_CASE("--intra / --inter lists") {
  auto g = ff::measure::parse_geometries("1x4,2x2", false);
  REQUIRE(g.size() == 2);
  CHECK((!g[0].inter && g[0].stride == 1 && g[0].size == 4));
  CHECK((!g[1].inter && g[1].stride == 2 && g[1].size == 2));
  auto h = ff::measure::parse_geometries("3x2", true);
  REQUIRE(h.size() == 1);
  CHECK((h[0].inter && h[0].groups_per_node == 3 && h[0].size == 2));
  CHECK(ff::measure::parse_geometries("none", true).empty());
  for (const char* bad : {"", "1x", "x2", "0x2", "1x2,", "1y2", "1x2x3", "a,b", "1x2s2"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(ff::measure::parse_geometries(bad, false), ff::InputError);
  }
  // --inter takes an optional third number, the members per node.
  auto m = ff::measure::parse_geometries("1x8x2,2x2", true);
  REQUIRE(m.size() == 2);
  CHECK((m[0].inter && m[0].groups_per_node == 1 && m[0].size == 8 && m[0].members_per_node == 2));
  CHECK((m[1].inter && m[1].groups_per_node == 2 && m[1].size == 2 && m[1].members_per_node == 1));
  CHECK(h[0].members_per_node == 1);
  // ... and a suffix sK, nodes K apart.
  auto k = ff::measure::parse_geometries("2x2s2,1x4x2,1x8x1s4", true);
  REQUIRE(k.size() == 3);
  CHECK((k[0].groups_per_node == 2 && k[0].size == 2 && k[0].members_per_node == 1 && k[0].node_stride == 2));
  CHECK(k[1].node_stride == 1);
  CHECK((k[2].size == 8 && k[2].members_per_node == 1 && k[2].node_stride == 4));
  for (const char* bad : {"1x2x", "1x2x0", "1x2y2", "1x2x2x2", "1x2x2,", "0x4x2", "1x2s", "1x2s0", "1x2s2x2",
                          "1x2s2s2", " 1x2", "1x+2", "1x-2"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(ff::measure::parse_geometries(bad, true), ff::InputError);
  }
}
