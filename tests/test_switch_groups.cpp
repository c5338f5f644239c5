// A two-level fabric: nodes in switch groups whose uplinks every crossing
// ring shares (MODEL.md §2, "Switch groups"). Expectations by hand from the
// ring formulas and the shares; the loader's errors name the field.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "advisor/core/bundled_profiles.hpp"
#include "advisor/core/machine_profile.hpp"
#include "advisor/model/comm_model.hpp"
#include "advisor/model/cost_model.hpp"
#include "tests/helpers.hpp"

using namespace ff;
using fftest::hand_all_reduce;
using fftest::hand_gather_scatter;
using fftest::rel;

namespace {

// The toy machine's node link (α 10 µs, 80 GB/s a node), in switch groups
// of `per_group` nodes with a 40 GB/s uplink and α 20 µs across it.
MachineProfile two_level(int gpus_per_node, int per_group, double global_busbw = 40e9) {
  MachineProfile p = fftest::toy_machine(gpus_per_node);
  p.switch_groups = {per_group, global_busbw, 20e-6};
  return p;
}

constexpr double B = 64e6;  // bytes: large enough that bandwidth dominates

}  // namespace

TEST_CASE("switch groups: a ring inside one switch group is priced as without them") {
  // 1 GPU a node, 4 nodes a group, 16 ranks; size 4, stride 1: {0..3}, {4..7}, … each in one group.
  const MachineProfile p = two_level(1, 4);
  const AxisLink l = axis_link(p, 16, 1, 4);
  CHECK(l.across);
  CHECK(l.rings_per_uplink == 0);
  CHECK(collective_time(Coll::AllReduce, B, l) == rel(hand_all_reduce(4, B, 10e-6, 80e9)));
  // And the same as the profile without the section.
  const AxisLink flat = axis_link(fftest::toy_machine(1), 16, 1, 4);
  CHECK(collective_time(Coll::AllReduce, B, l) == collective_time(Coll::AllReduce, B, flat));
}

TEST_CASE("switch groups: one ring over 2 groups alone takes the global link's busbw and α") {
  // 8 ranks, 4 nodes a group: the one group {0..7} crosses each uplink once.
  const MachineProfile p = two_level(1, 4);
  const AxisLink l = axis_link(p, 8, 1, 8);
  CHECK(l.rings_per_uplink == 1);
  // busbw = min(80 / 1, 40 / 1) = 40 GB/s; α = max(10, 20) = 20 µs.
  CHECK(collective_time(Coll::AllReduce, B, l) == rel(20e-6 * 14 + 14.0 / 8 * B / 40e9));
  CHECK(collective_time(Coll::AllGather, B, l) == rel(hand_gather_scatter(8, B, 20e-6, 40e9)));
  // A global link faster than the node's: the node's share prices (min), α still the larger.
  const AxisLink fast = axis_link(two_level(1, 4, 400e9), 8, 1, 8);
  CHECK(collective_time(Coll::AllReduce, B, fast) == rel(hand_all_reduce(8, B, 20e-6, 80e9)));
  // No α for the tier: the node's stays.
  MachineProfile no_alpha = two_level(1, 4);
  no_alpha.switch_groups.alpha_s = 0;
  CHECK(collective_time(Coll::AllReduce, B, axis_link(no_alpha, 8, 1, 8)) == rel(hand_all_reduce(8, B, 10e-6, 40e9)));
}

TEST_CASE("switch groups: 2 concurrent rings share each uplink") {
  // 2 GPUs a node, 2 nodes a group (4 ranks a group), 16 ranks. Size 8,
  // stride 2: {0,2,…,14} and {1,3,…,15}, each on every node and every group.
  const MachineProfile p = two_level(2, 2);
  const AxisLink l = axis_link(p, 16, 2, 8);
  CHECK(l.groups_per_node == 2);
  CHECK(l.rings_per_uplink == 2);
  // node share 80 / 2 = 40, uplink share 40 / 2 = 20: busbw 20 GB/s, α 20 µs.
  CHECK(collective_time(Coll::AllReduce, B, l) == rel(hand_all_reduce(8, B, 20e-6, 20e9)));
  CHECK(collective_time(Coll::ReduceScatter, B, l) == rel(hand_gather_scatter(8, B, 20e-6, 20e9)));
  // Size 8, stride 1 on the same machine: {0..7} over groups 0-1, {8..15}
  // over 2-3: one ring an uplink, one a node: min(80, 40) = 40 GB/s.
  const AxisLink apart = axis_link(p, 16, 1, 8);
  CHECK(apart.rings_per_uplink == 1);
  CHECK(collective_time(Coll::AllReduce, B, apart) == rel(hand_all_reduce(8, B, 20e-6, 40e9)));
}

TEST_CASE("switch groups: 4 concurrent rings share each uplink") {
  // 1 GPU a node, 4 nodes a group, 16 ranks. Size 4, stride 4: {0,4,8,12},
  // {1,5,9,13}, …: each a member in every group, one a node.
  const MachineProfile p = two_level(1, 4);
  const AxisLink l = axis_link(p, 16, 4, 4);
  CHECK(l.groups_per_node == 1);
  CHECK(l.rings_per_uplink == 4);
  // node share 80, uplink share 40 / 4 = 10 GB/s.
  CHECK(collective_time(Coll::AllReduce, B, l) == rel(hand_all_reduce(4, B, 20e-6, 10e9)));
  CHECK(collective_time(Coll::AllGather, B, l, true) == rel(hand_gather_scatter(4, B, 20e-6, 10e9)));
}

namespace {

// A measured all-reduce of 8 ranks: fit α 10 µs, 80 GB/s; its curve's
// points are that fit's times at 1 MB and 64 MB.
LinkParams measured_all_reduce_of_8() {
  LinkParams m = fftest::measured(10e-6, 80e9);
  auto c = std::make_shared<MeasuredCurve>();
  c->bytes = {1e6, 64e6};
  c->seconds = {hand_all_reduce(8, 1e6, 10e-6, 80e9), hand_all_reduce(8, 64e6, 10e-6, 80e9)};
  c->alpha_s = 10e-6, c->busbw = 80e9;
  m.by_op[0] = true, m.op_alpha_s[0] = 10e-6, m.op_busbw[0] = 80e9;
  m.curve[0] = c;
  return m;
}

}  // namespace

TEST_CASE("switch groups: a measured curve is slowed to the uplink's share") {
  // The curve measured inside a group.
  MachineProfile p = two_level(1, 4);
  p.inter = {{1, 8, measured_all_reduce_of_8(), 1}};
  // Crossing one uplink alone: latency part ×2 (20/10 µs), the rest ×2 (80/40 GB/s).
  const AxisLink l = axis_link(p, 8, 1, 8);
  CHECK(collective_time(Coll::AllReduce, 64e6, l) == rel(hand_all_reduce(8, 64e6, 20e-6, 40e9)));
}

TEST_CASE("switch groups: a curve timed at the same crossing count already holds the uplink") {
  // The same curve measured over both groups (α 10 µs, 80 GB/s as
  // measured), stated as timed with 1 ring an uplink: a group priced
  // crossing each uplink once takes it as it is.
  MachineProfile p = two_level(1, 4);
  LinkParams m = measured_all_reduce_of_8();
  m.rings_per_uplink = 1;
  p.inter = {{1, 8, m, 1}};
  const AxisLink l = axis_link(p, 8, 1, 8);
  REQUIRE(l.rings_per_uplink == 1);
  CHECK(collective_time(Coll::AllReduce, 64e6, l) == rel(hand_all_reduce(8, 64e6, 10e-6, 80e9)));
  // The other counts, with the node's own link at 50 GB/s and an uplink
  // too fast to bind (400 GB/s), so each source of the figures shows.
  p.inter_node = fftest::measured(10e-6, 50e9);
  p.switch_groups.busbw = 400e9;
  // Timed inside the switch groups (0 rings) and priced at 1: the entry,
  // bounded: α raised to the tier's 20 µs, its 80 GB/s under the uplink.
  p.inter[0].link.rings_per_uplink = 0;
  CHECK(collective_time(Coll::AllReduce, 64e6, axis_link(p, 8, 1, 8)) == rel(hand_all_reduce(8, 64e6, 20e-6, 80e9)));
  // Timed with 2 rings an uplink and priced at 1: not the entry (it holds
  // more sharing than this group has), the node's link, bounded.
  p.inter[0].link.rings_per_uplink = 2;
  CHECK(collective_time(Coll::AllReduce, 64e6, axis_link(p, 8, 1, 8)) == rel(hand_all_reduce(8, 64e6, 20e-6, 50e9)));
}

TEST_CASE("switch groups: pipeline pairs crossing an uplink share it") {
  // 1 GPU a node, 4 nodes a group, 16 ranks, 4 stages of stride 4: pairs
  // (r, r+4). Group 1 (ranks 4-7) has 4 pairs to group 0 and 4 to group 2:
  // 8 on its uplink each way. Node 4: pairs (0,4) and (4,8), so without a
  // p2p section a pair is a 2-rank all-gather at 80 / 2 GB/s, α 10 µs.
  const PairLink l = pair_link(two_level(1, 4), 16, 4, 4);
  CHECK(l.pairs_per_node == 2);
  CHECK(l.pairs_per_uplink == 8);
  CHECK(message_time(B, l) == rel(20e-6 + B / (40e9 / 8)));
  CHECK(pair_link(fftest::toy_machine(1), 16, 4, 4).pairs_per_uplink == 0);
  // Stages inside a group (stride 1 over 4 ranks a group, 4 stages): no pair leaves it.
  CHECK(pair_link(two_level(1, 4), 16, 1, 4).pairs_per_uplink == 0);
}

TEST_CASE("switch groups: the profile section") {
  nlohmann::json j;
  for (const auto& b : bundled_profiles())
    if (std::string(b.name) == "perlmutter") j = nlohmann::json::parse(b.json);
  REQUIRE(!j.is_null());
  j["switch_groups"] = {{"nodes_per_group", 16}, {"global_busbw_GBps", 25}, {"alpha_us", 4}, {"source", "by hand"}};
  const MachineProfile p = machine_from_json(j, "t.json");
  CHECK(p.switch_groups.nodes_per_group == 16);
  CHECK(p.switch_groups.busbw == rel(25e9));
  CHECK(p.switch_groups.alpha_s == rel(4e-6));
  // The "how sure" inter tier scales the global link with the nodes'.
  CHECK(scaled(p, Tier::Inter, 0.5).switch_groups.busbw == rel(12.5e9));

  auto error_of = [](nlohmann::json bad) { return fftest::input_error_of([&] { machine_from_json(bad, "t.json"); }); };
  nlohmann::json bad = j;
  bad["switch_groups"]["global_bw_GBps"] = 25;
  CHECK(fftest::contains(error_of(bad), "field 'switch_groups.global_bw_GBps': unknown field"));
  bad = j;
  bad["switch_groups"].erase("nodes_per_group");
  CHECK(fftest::contains(error_of(bad), "switch_groups.nodes_per_group"));
  bad = j;
  bad["switch_groups"]["nodes_per_group"] = 0;
  CHECK(fftest::contains(error_of(bad), "switch_groups.nodes_per_group"));
  bad = j;
  bad["switch_groups"]["global_busbw_GBps"] = -1;
  CHECK(fftest::contains(error_of(bad), "switch_groups.global_busbw_GBps"));
  // A cross-node entry says how many rings shared each uplink as it was timed.
  nlohmann::json entry = {{"groups_per_node", 2}, {"size", 4}, {"alpha_us", 10}, {"busbw_GBps", 5},
                          {"rings_per_uplink", 2}};
  nlohmann::json with = j;
  with["inter_node"]["table"] = nlohmann::json::array({entry});
  CHECK(machine_from_json(with, "t.json").inter.at(0).link.rings_per_uplink == 2);
  with["inter_node"]["table"][0].erase("rings_per_uplink");
  CHECK(machine_from_json(with, "t.json").inter.at(0).link.rings_per_uplink == -1);
  with["inter_node"]["table"][0]["rings_per_uplink"] = -1;
  CHECK(fftest::contains(error_of(with), "inter_node.table[0].rings_per_uplink"));
  // Without the section: no tier.
  j.erase("switch_groups");
  CHECK(machine_from_json(j, "t.json").switch_groups.nodes_per_group == 0);
}

TEST_CASE("switch groups: which configurations cross an uplink (validate counts them)") {
  // 1 GPU a node, 4 nodes a group, 8 ranks in two groups {0..3}, {4..7}.
  const MachineProfile p = two_level(1, 4);
  auto config = [](Grid g, const char* order) {
    Config c;
    c.grid = g;
    c.order = parse_order(order);
    return c;
  };
  // Z of 4 innermost: {0..3} and {4..7}, each inside a group; data of 2 at
  // stride 4 pairs rank r with r + 4: it crosses.
  CHECK(crosses_switch_groups(p, config({1, 1, 4, 2}, "xyzd")));
  // Z of 2 innermost, data of 2 next ({0, 2}, ...), stages last at stride 4:
  // every pair (r, r + 4) crosses.
  CHECK(crosses_switch_groups(p, config({1, 1, 2, 2, 2}, "xyzdp")));
  // Data of 2 innermost ({0, 1}), Z of 4 at stride 2 ({0, 2, 4, 6}): Z crosses.
  CHECK(crosses_switch_groups(p, config({1, 1, 4, 2}, "xydz")));
  // Four ranks, all in the first group: nothing leaves it.
  CHECK_FALSE(crosses_switch_groups(p, config({1, 2, 2, 1}, "xyzd")));
  // Without the section nothing is counted.
  CHECK_FALSE(crosses_switch_groups(fftest::toy_machine(1), config({1, 1, 4, 2}, "xyzd")));
}

TEST_CASE("switch groups: the world group of the end-of-step scalars crosses each uplink once") {
  // 1 GPU a node, 4 nodes a group: 8 ranks span two groups, one ring over
  // both: busbw min(80, 40 / 1) = 40 GB/s, α max(10, 20) = 20 µs. 4 ranks
  // stay in one group: the node link alone.
  const MachineProfile p = two_level(1, 4);
  CHECK(collective_time(Coll::AllReduce, 8, B, world_link(p, 8)) == rel(hand_all_reduce(8, B, 20e-6, 40e9)));
  CHECK(collective_time(Coll::AllReduce, 4, B, world_link(p, 4)) == rel(hand_all_reduce(4, B, 10e-6, 80e9)));
}
