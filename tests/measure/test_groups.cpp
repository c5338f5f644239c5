// Which ranks each geometry puts together, against lists written out by
// hand: ranks sit on nodes in blocks (rank r on node r / per_node).
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "check.hpp"
#include "groups.hpp"

using Groups = std::vector<std::vector<int>>;
using meas::geometry_groups;

namespace {
ff::Geometry intra(long long stride, int size) { return ff::Geometry{false, stride, size, 1}; }
ff::Geometry inter(int per_node_groups, int size) { return ff::Geometry{true, 1, size, per_node_groups}; }
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
    for (const auto& g : meas::default_geometries(ranks, per_node)) out.push_back(meas::geometry_name(g));
    return out;
  };
  CHECK(names(2, 2) == std::vector<std::string>{"intra stride 1 size 2"});
  CHECK(names(2, 1) == std::vector<std::string>{"inter 1 groups/node size 2"});
  CHECK(names(8, 4) == std::vector<std::string>{
                           "intra stride 1 size 2", "intra stride 1 size 3", "intra stride 1 size 4",
                           "intra stride 2 size 2", "inter 1 groups/node size 2", "inter 2 groups/node size 2",
                           "inter 3 groups/node size 2", "inter 4 groups/node size 2"});
  CHECK(names(6, 3) == std::vector<std::string>{"intra stride 1 size 2", "intra stride 1 size 3",
                                                "inter 1 groups/node size 2", "inter 2 groups/node size 2",
                                                "inter 3 groups/node size 2"});
  // 6 nodes of 1: sizes 2, 4 (powers of two) and 6 (all nodes).
  CHECK(names(6, 1) == std::vector<std::string>{"inter 1 groups/node size 2", "inter 1 groups/node size 4",
                                                "inter 1 groups/node size 6"});
}

TEST_CASE("every default geometry's groups: disjoint, the right size, inside or across nodes as named") {
  for (auto [ranks, per_node] : {std::pair{8, 4}, {6, 3}, {12, 3}, {16, 8}, {24, 6}, {8, 1}})
    for (const auto& g : meas::default_geometries(ranks, per_node)) {
      CAPTURE(ranks);
      CAPTURE(per_node);
      CAPTURE(meas::geometry_name(g));
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
          for (size_t i = 1; i < nodes.size(); ++i) CHECK(nodes[i] == nodes[i - 1] + 1);
          for (int n : nodes) ++groups_on_node[size_t(n)];
        }
      }
      for (int s : seen) CHECK(s <= 1);
      // Inter: every node in use holds exactly c groups' members.
      if (g.inter)
        for (int c : groups_on_node) CHECK((c == 0 || c == g.groups_per_node));
    }
}

TEST_CASE("a geometry the run is too small for is named with what it needs") {
  CHECK(meas::geometry_problem(intra(1, 4), 8, 4) == "");
  CHECK(meas::geometry_problem(intra(1, 4), 2, 2) ==
        "intra stride 1 size 4: needs 4 ranks on one node; this run has 2 ranks, 2 per node (see --gpus-per-node)");
  CHECK(meas::geometry_problem(intra(2, 3), 12, 3).find("needs 6 ranks on one node") != std::string::npos);
  CHECK(meas::geometry_problem(inter(1, 4), 8, 4).find("needs 4 nodes") != std::string::npos);
  CHECK(meas::geometry_problem(inter(5, 2), 8, 4).find("groups per node must be between 1 and") != std::string::npos);
}

TEST_CASE("--intra / --inter lists") {
  auto g = meas::parse_geometries("1x4,2x2", false);
  REQUIRE(g.size() == 2);
  CHECK((!g[0].inter && g[0].stride == 1 && g[0].size == 4));
  CHECK((!g[1].inter && g[1].stride == 2 && g[1].size == 2));
  auto h = meas::parse_geometries("3x2", true);
  REQUIRE(h.size() == 1);
  CHECK((h[0].inter && h[0].groups_per_node == 3 && h[0].size == 2));
  CHECK(meas::parse_geometries("none", true).empty());
  for (const char* bad : {"", "1x", "x2", "0x2", "1x2,", "1y2", "1x2x3", "a,b"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(meas::parse_geometries(bad, false), meas::UsageError);
  }
}
