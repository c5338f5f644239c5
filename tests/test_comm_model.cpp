// Collective cost and which bandwidth a grid axis sees (MODEL.md §2 "Collectives",
// "Which bandwidth").
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <memory>

#include "advisor/model/comm_model.hpp"
#include "tests/helpers.hpp"

using namespace ff;
using fftest::hand_all_reduce;
using fftest::hand_gather_scatter;
using fftest::rel;

constexpr double GBps = 1e9;

TEST_CASE("comm: collective_time follows the ring alpha-beta formulas") {
  const LinkParams link = fftest::measured(5e-6, 225e9);
  const double bytes = 3e6;
  // all-reduce: α·2(g−1) + 2(g−1)/g · bytes/busbw
  CHECK(collective_time(Coll::AllReduce, 4, bytes, link) == rel(5e-6 * 2 * (4 - 1) + 2.0 * (4 - 1) / 4 * bytes / 225e9));
  CHECK(collective_time(Coll::AllReduce, 2, bytes, link) == rel(5e-6 * 2 * 1 + 2.0 * 1 / 2 * bytes / 225e9));
  CHECK(collective_time(Coll::AllReduce, 3, bytes, link) == rel(5e-6 * 2 * 2 + 2.0 * 2 / 3 * bytes / 225e9));
  // all-gather (bytes = output), reduce-scatter (bytes = input): α·(g−1) + (g−1)/g · bytes/busbw
  CHECK(collective_time(Coll::AllGather, 4, bytes, link) == rel(5e-6 * (4 - 1) + 3.0 / 4 * bytes / 225e9));
  CHECK(collective_time(Coll::ReduceScatter, 4, bytes, link) == rel(5e-6 * (4 - 1) + 3.0 / 4 * bytes / 225e9));
  CHECK(collective_time(Coll::AllGather, 8, bytes, link) == rel(5e-6 * 7 + 7.0 / 8 * bytes / 225e9));
  // A group of one costs nothing, whatever the link.
  for (Coll c : {Coll::AllReduce, Coll::AllGather, Coll::ReduceScatter}) {
    CHECK(collective_time(c, 1, bytes, link) == 0);
    AxisLink one;  // size 1
    CHECK(collective_time(c, bytes, one) == 0);
  }
  // A collective measured apart uses its own figures; the others the joint ones.
  LinkParams split = link;
  split.by_op[int(Coll::ReduceScatter)] = true;
  split.op_alpha_s[int(Coll::ReduceScatter)] = 40e-6;
  split.op_busbw[int(Coll::ReduceScatter)] = 75e9;
  CHECK(collective_time(Coll::ReduceScatter, 4, bytes, split) == rel(40e-6 * 3 + 3.0 / 4 * bytes / 75e9));
  CHECK(collective_time(Coll::AllGather, 4, bytes, split) == rel(5e-6 * 3 + 3.0 / 4 * bytes / 225e9));
  // Issued non-blocking: the non-blocking figure where measured, else the blocking one.
  split.nb_by_op[int(Coll::AllGather)] = true;
  split.nb_alpha_s[int(Coll::AllGather)] = 60e-6;
  split.nb_busbw[int(Coll::AllGather)] = 50e9;
  MachineProfile one_node = fftest::toy_machine(4);
  one_node.intra_default = split;
  AxisLink inside = axis_link(one_node, 4, 1, 4);
  CHECK(collective_time(Coll::AllGather, bytes, inside, true) == rel(60e-6 * 3 + 3.0 / 4 * bytes / 50e9));
  CHECK(collective_time(Coll::AllGather, bytes, inside, false) == rel(5e-6 * 3 + 3.0 / 4 * bytes / 225e9));
  CHECK(collective_time(Coll::ReduceScatter, bytes, inside, true) == rel(40e-6 * 3 + 3.0 / 4 * bytes / 75e9));
  CHECK(collective_time(Coll::AllReduce, bytes, inside, true) == rel(5e-6 * 6 + 6.0 / 4 * bytes / 225e9));
  CHECK(std::string(coll_name(Coll::AllReduce)) == "all-reduce");
  CHECK(std::string(coll_name(Coll::AllGather)) == "all-gather");
  CHECK(std::string(coll_name(Coll::ReduceScatter)) == "reduce-scatter");
}

TEST_CASE("comm: an all-reduce where the profile did not measure the group size: the cheaper of ring and tree") {
  // Recursive doubling: ⌈log2 g⌉ rounds of α + bytes/bw.
  const LinkParams nominal{5e-6, 10e9};
  // 128 ranks, 4 bytes (a LayerNorm statistic): ring 2·127·5 µs + 2·127/128·4 B / 10 GB/s = 1270.0008 µs;
  // doubling 7·(5 µs + 0.4 ns) = 35.0028 µs.
  CHECK(collective_time(Coll::AllReduce, 128, 4, nominal) == rel(7 * (5e-6 + 4 / 10e9)));
  // 1 GiB on 128: ring 1.27 ms + 254/128 · 0.10737 s = 0.21434 s; doubling 7·(5 µs + 0.10737 s) = 0.75165 s.
  const double gib = 1073741824.0;
  CHECK(collective_time(Coll::AllReduce, 128, gib, nominal) == rel(2 * 127 * 5e-6 + 2.0 * 127 / 128 * gib / 10e9));
  // 3 ranks take ⌈log2 3⌉ = 2 rounds: 4 KiB, ring 4·5 µs + 4/3 · 0.4096 µs = 20.546 µs; doubling 2·(5 + 0.4096) µs.
  CHECK(collective_time(Coll::AllReduce, 3, 4096, nominal) == rel(2 * (5e-6 + 4096 / 10e9)));
  // Measured at this size, the ring as fitted; and only all-reduce has the choice.
  LinkParams fitted = nominal;
  fitted.measured_here = true;
  CHECK(collective_time(Coll::AllReduce, 128, 4, fitted) == rel(2 * 127 * 5e-6 + 2.0 * 127 / 128 * 4 / 10e9));
  CHECK(collective_time(Coll::AllGather, 128, 4, nominal) == rel(127 * 5e-6 + 127.0 / 128 * 4 / 10e9));
  // On an axis: a profile's measured table entry keeps the ring, the node link of a size it lacks does not.
  MachineProfile p = fftest::toy_machine(4);
  p.intra = {{1, 4, fftest::measured(5e-6, 10e9)}};
  p.intra_default = nominal;
  CHECK(collective_time(Coll::AllReduce, 4, axis_link(p, 4, 1, 4)) == rel(2 * 3 * 5e-6 + 1.5 * 4 / 10e9));
  CHECK(collective_time(Coll::AllReduce, 4, axis_link(p, 4, 1, 2)) == rel(1 * (5e-6 + 4 / 10e9)));
}

TEST_CASE("comm: a measured curve is interpolated in log-log; its latency and bandwidth parts scale apart") {
  // All-reduce on 2 ranks measured at 1, 4 and 16 KiB: 100, 400, 3200 µs;
  // its fit α 20 µs, busbw 10 MB/s (2 ring steps: latency 40 µs).
  auto curve = std::make_shared<MeasuredCurve>();
  curve->bytes = {1024, 4096, 16384};
  curve->seconds = {100e-6, 400e-6, 3200e-6};
  curve->alpha_s = 20e-6, curve->busbw = 1e7;
  LinkParams l = fftest::measured(20e-6, 1e7);
  l.curve[int(Coll::AllReduce)] = curve;
  const Coll ar = Coll::AllReduce;
  CHECK(collective_time(ar, 2, 1024, l) == rel(100e-6));
  CHECK(collective_time(ar, 2, 512, l) == rel(100e-6));    // below the smallest size: its time
  CHECK(collective_time(ar, 2, 2048, l) == rel(200e-6));   // halfway in log: sqrt(100 · 400)
  CHECK(collective_time(ar, 2, 8192, l) == rel(std::sqrt(400e-6 * 3200e-6)));
  // Beyond the largest: its time plus the rest at the fit's busbw, 2(g−1)/g = 1.
  CHECK(collective_time(ar, 2, 32768, l) == rel(3200e-6 + 16384 / 1e7));
  // Collectives without a curve keep the ring α-β.
  CHECK(collective_time(Coll::AllGather, 2, 2048, l) == rel(20e-6 + 0.5 * 2048 / 1e7));
  // Bandwidth ×2, latency ×0.5: at 2 KiB, 40 µs of the 200 are latency:
  // 40 · 0.5 + 160 / 2 = 100 µs.
  LinkParams scaled = l;
  scale_link(scaled, 2, 0.5);
  CHECK(collective_time(ar, 2, 2048, scaled) == rel(100e-6));
  // An axis prices with it, blocking and (no non-blocking figures) non-blocking.
  MachineProfile one_node = fftest::toy_machine(2);
  one_node.intra_default = l;
  AxisLink inside = axis_link(one_node, 2, 1, 2);
  CHECK(collective_time(ar, 2048, inside) == rel(200e-6));
  CHECK(collective_time(ar, 2048, inside, true) == rel(200e-6));
  // Non-blocking measured apart: its own α-β, not the blocking curve.
  one_node.intra_default.nb_by_op[int(ar)] = true;
  one_node.intra_default.nb_alpha_s[int(ar)] = 30e-6;
  one_node.intra_default.nb_busbw[int(ar)] = 1e7;
  AxisLink nb = axis_link(one_node, 2, 1, 2);
  CHECK(collective_time(ar, 2048, nb, true) == rel(2 * 30e-6 + 2048 / 1e7));
  CHECK(nb.nonblocking_differs);
}

TEST_CASE("comm: a measured curve is priced no higher at a size than at any larger one (padding)") {
  // In order already: unchanged.
  CHECK(padded_times({1, 2, 2, 5}) == std::vector<double>{1, 2, 2, 5});
  // One slow first sample (an all-reduce measured 3.1 ms at 1 KiB, 1.9-2.2 ms
  // from 2 to 32 KiB): 1 KiB costs what 2 KiB does; the rest as measured.
  CHECK(padded_times({3100, 1903, 1987, 2221, 2084, 2195, 4329}) ==
        std::vector<double>{1903, 1903, 1987, 2084, 2084, 2195, 4329});
  CHECK(padded_times({1, 5, 3, 4.5}) == std::vector<double>{1, 3, 3, 4.5});
}

TEST_CASE("comm: axis links on a Perlmutter-like profile (4 GPUs a node)") {
  const MachineProfile p = fftest::perlmutter_like();
  const long long total = 16;  // 4 nodes

  SUBCASE("stride 1 size 4: {0..3} inside a node, intra table (1,4) = 225") {
    AxisLink l = axis_link(p, total, 1, 4);
    CHECK(l.size == 4);
    CHECK(l.inside);
    CHECK_FALSE(l.across);
    CHECK(l.intra.busbw == 225 * GBps);
    CHECK(collective_time(Coll::AllReduce, 1e6, l) == rel(hand_all_reduce(4, 1e6, 5e-6, 225e9)));
  }
  SUBCASE("stride 2 size 2: {0,2} inside, intra table (2,2) = 76") {
    AxisLink l = axis_link(p, total, 2, 2);
    CHECK(l.inside);
    CHECK_FALSE(l.across);
    CHECK(l.intra.busbw == 76 * GBps);
  }
  SUBCASE("stride 4 size 2: {0,4},{1,5},{2,6},{3,7} all leave node 0: c = min(4, 4) = 4, 80/4 = 20") {
    AxisLink l = axis_link(p, total, 4, 2);
    CHECK_FALSE(l.inside);
    CHECK(l.across);
    CHECK(l.groups_per_node == 4);
    CHECK(l.inter.busbw == rel(80 * GBps / 4));
    CHECK(l.inter.alpha_s == 10e-6);
    CHECK(collective_time(Coll::AllGather, 1e6, l) == rel(hand_gather_scatter(2, 1e6, 10e-6, 80e9 / 4)));
  }
  SUBCASE("stride 1 size 8: {0..7} spans nodes 0 and 1, one group a node: c = 1, 80") {
    AxisLink l = axis_link(p, total, 1, 8);
    CHECK_FALSE(l.inside);
    CHECK(l.across);
    CHECK(l.groups_per_node == 1);
    CHECK(l.inter.busbw == rel(80 * GBps));
  }
  SUBCASE("stride 2 size 4: {0,2,4,6},{1,3,5,7} share nodes 0 and 1: c = 2, 40") {
    AxisLink l = axis_link(p, total, 2, 4);
    CHECK_FALSE(l.inside);
    CHECK(l.across);
    CHECK(l.groups_per_node == 2);
    CHECK(l.inter.busbw == rel(80 * GBps / 2));
  }
  SUBCASE("stride 8 size 2: c = min(8, 4) = 4, 20") {
    AxisLink l = axis_link(p, total, 8, 2);
    CHECK(l.groups_per_node == 4);
    CHECK(l.inter.busbw == rel(80 * GBps / 4));
  }
  SUBCASE("size 1: no group, no link") {
    AxisLink l = axis_link(p, total, 4, 1);
    CHECK_FALSE(l.inside);
    CHECK_FALSE(l.across);
    CHECK(collective_time(Coll::AllReduce, 1e6, l) == 0);
  }
}

TEST_CASE("comm: rings at scale: a call cost, and the faster of two protocols") {
  LinkParams l;
  l.alpha_s = 10e-6, l.busbw = 100e9, l.call_s = 50e-6, l.ll_alpha_s = 5e-6;
  // All-gather of 1 MiB over 8: Simple 7·10 µs + 7/8·1,048,576 B / 100 GB/s =
  // 70 + 9.175 µs; LL 7·5 µs + twice the wire, 35 + 18.350 µs, faster; + 50.
  CHECK(collective_time(Coll::AllGather, 8, 1048576, l) == rel(50e-6 + 35e-6 + 18.350080e-6));
  // 1 GiB: Simple 70 µs + 9,395.24 µs beats LL's 35 + 18,790.48 µs.
  CHECK(collective_time(Coll::AllGather, 8, 1073741824, l) == rel(50e-6 + 70e-6 + 9395.240960e-6));
  // LL at a quarter of the busbw (a fitted ll_bw_fraction): 35 µs + four
  // times the wire, 35 + 36.700 µs, still under Simple's 79.175 µs.
  l.ll_bw_fraction = 0.25;
  CHECK(collective_time(Coll::AllGather, 8, 1048576, l) == rel(50e-6 + 35e-6 + 36.700160e-6));
  // 16 MiB: LL's 35 + 587.2 µs loses to Simple's 70 + 146.8 µs.
  CHECK(collective_time(Coll::AllGather, 8, 16777216, l) == rel(50e-6 + 70e-6 + 146.800640e-6));
  // Without them, the ring as before.
  l.call_s = l.ll_alpha_s = 0;
  CHECK(collective_time(Coll::AllGather, 8, 1048576, l) == rel(70e-6 + 9.175040e-6));
}

TEST_CASE("comm: the bundled perlmutter profile gives the same links") {
  const MachineProfile p = load_machine("perlmutter");
  CHECK(p.gpus_per_node == 4);
  CHECK(axis_link(p, 16, 1, 4).intra.busbw == 225 * GBps);
  CHECK(axis_link(p, 16, 1, 2).intra.busbw == 76 * GBps);
  CHECK(axis_link(p, 16, 2, 2).intra.busbw == 76 * GBps);
  CHECK(axis_link(p, 16, 4, 2).inter.busbw == rel(67.9 * GBps / 4));
  CHECK(axis_link(p, 16, 1, 8).inter.busbw == rel(67.9 * GBps));
  CHECK(axis_link(p, 16, 2, 4).inter.busbw == rel(67.9 * GBps / 2));
  // Rings at scale (MODEL.md §2): the call cost and the LL step latency go
  // with the node's link to every group that shares it.
  CHECK(axis_link(p, 16, 4, 2).inter.call_s == rel(68.8e-6));
  CHECK(axis_link(p, 16, 4, 2).inter.ll_alpha_s == rel(6.37e-6));
  CHECK(axis_link(p, 16, 4, 2).inter.ll_bw_fraction == rel(0.195));
  // 1024 ranks (256 nodes), stride 16 size 4: every node's 4 ranks each lead to
  // a different group, c = min(16, 4) = 4.
  CHECK(axis_link(p, 1024, 16, 4).groups_per_node == 4);
  CHECK(axis_link(p, 1024, 16, 4).inter.busbw == rel(67.9 * GBps / 4));
}

TEST_CASE("comm: the bundled frontier profile (8 GCDs a node)") {
  const MachineProfile p = load_machine("frontier");
  CHECK(p.gpus_per_node == 8);
  // Inside a node the table is not uniform (MI250X): stride 1 g=2 129, g=4 52,
  // g=8 135; stride 2 g=2 50, g=4 72; stride 4 g=2 36.
  CHECK(axis_link(p, 32, 1, 2).intra.busbw == 129 * GBps);
  CHECK(axis_link(p, 32, 1, 4).intra.busbw == 52 * GBps);
  CHECK(axis_link(p, 32, 1, 8).intra.busbw == 135 * GBps);
  CHECK(axis_link(p, 32, 2, 2).intra.busbw == 50 * GBps);
  AxisLink s2g4 = axis_link(p, 32, 2, 4);  // {0,2,4,6},{1,3,5,7} inside node 0
  CHECK(s2g4.inside);
  CHECK_FALSE(s2g4.across);
  CHECK(s2g4.intra.busbw == 72 * GBps);
  CHECK(axis_link(p, 32, 4, 2).intra.busbw == 36 * GBps);
  // Across: stride 8 size 2, all 8 ranks of node 0 lead to a group: c = 8, 40/8 = 5.
  AxisLink s8 = axis_link(p, 32, 8, 2);
  CHECK(s8.across);
  CHECK_FALSE(s8.inside);
  CHECK(s8.groups_per_node == 8);
  CHECK(s8.inter.busbw == rel(40 * GBps / 8));
  // Stride 4 size 4: {0,4,8,12}…{3,7,11,15} span nodes 0 and 1: c = min(4, 8) = 4, 10.
  CHECK(axis_link(p, 32, 4, 4).groups_per_node == 4);
  CHECK(axis_link(p, 32, 4, 4).inter.busbw == rel(40 * GBps / 4));
  // Stride 1 size 16: one group over two nodes, c = 1, 40.
  CHECK(axis_link(p, 32, 1, 16).inter.busbw == rel(40 * GBps));
}

TEST_CASE("comm: group_geometry with a node size that is not a power of two (6 a node)") {
  SUBCASE("stride 1 size 4 among 12 ranks: {0..3} inside, {4..7} spans nodes 0,1, {8..11} inside") {
    GroupGeometry geo = group_geometry(12, 6, 1, 4);
    CHECK(geo.any_inside);
    CHECK(geo.any_across);
    CHECK(geo.groups_per_node == 1);  // only {4..7} crosses, one group on each node
  }
  SUBCASE("stride 2 size 2 among 12: {0,2},{1,3} inside node 0; {4,6},{5,7} cross; {8,10},{9,11} inside node 1") {
    GroupGeometry geo = group_geometry(12, 6, 2, 2);
    CHECK(geo.any_inside);
    CHECK(geo.any_across);
    CHECK(geo.groups_per_node == 2);  // node 0 holds 4 and 5, node 1 holds 6 and 7
  }
  SUBCASE("stride 3 size 4 among 12: {0,3,6,9},{1,4,7,10},{2,5,8,11} all cross") {
    GroupGeometry geo = group_geometry(12, 6, 3, 4);
    CHECK_FALSE(geo.any_inside);
    CHECK(geo.any_across);
    CHECK(geo.groups_per_node == 3);
  }
  SUBCASE("stride 3 size 2 among 12: {0,3},{1,4},{2,5} inside node 0, {6,9},… inside node 1") {
    GroupGeometry geo = group_geometry(12, 6, 3, 2);
    CHECK(geo.any_inside);
    CHECK_FALSE(geo.any_across);
  }
  SUBCASE("a group size that is not a power of two: 4 a node, stride 2 size 3 among 12") {
    // {0,2,4},{1,3,5} span nodes 0,1; {6,8,10},{7,9,11} span nodes 1,2. Node 1
    // (ranks 4..7) meets all four groups: c = 4, although min(s, n) = 2.
    GroupGeometry geo = group_geometry(12, 4, 2, 3);
    CHECK_FALSE(geo.any_inside);
    CHECK(geo.any_across);
    CHECK(geo.groups_per_node == 4);
  }
  SUBCASE("only one period is needed: the answer for 12 ranks holds for 1200") {
    GroupGeometry a = group_geometry(12, 6, 2, 2), b = group_geometry(1200, 6, 2, 2);
    CHECK(a.any_inside == b.any_inside);
    CHECK(a.any_across == b.any_across);
    CHECK(a.groups_per_node == b.groups_per_node);
  }
}

TEST_CASE("comm: an axis with groups inside and across costs its slowest group") {
  MachineProfile p = fftest::toy_machine(6);
  p.intra = {{1, 4, fftest::measured(5e-6, 225e9)}, {2, 2, fftest::measured(5e-6, 76e9)}};
  p.inter_node = fftest::measured(10e-6, 80e9);
  const double bytes = 4e6;

  SUBCASE("stride 1 size 4 among 12: intra (1,4) 225 vs inter c = 1, 80") {
    AxisLink l = axis_link(p, 12, 1, 4);
    CHECK(l.inside);
    CHECK(l.across);
    CHECK(l.intra.busbw == 225 * GBps);
    CHECK(l.inter.busbw == rel(80 * GBps));
    double intra = 5e-6 * 2 * 3 + 2.0 * 3 / 4 * bytes / 225e9;
    double inter = 10e-6 * 2 * 3 + 2.0 * 3 / 4 * bytes / 80e9;
    CHECK(collective_time(Coll::AllReduce, bytes, l) == rel(std::max(intra, inter)));
    CHECK(collective_time(Coll::AllReduce, bytes, l) == rel(inter));
  }
  SUBCASE("the same axis when the node's own links are the slow ones") {
    p.intra[0].link.busbw = 10e9;
    AxisLink l = axis_link(p, 12, 1, 4);
    double intra = 5e-6 * 3 + 3.0 / 4 * bytes / 10e9;
    double inter = 10e-6 * 3 + 3.0 / 4 * bytes / 80e9;
    CHECK(collective_time(Coll::ReduceScatter, bytes, l) == rel(std::max(intra, inter)));
    CHECK(collective_time(Coll::ReduceScatter, bytes, l) == rel(intra));
  }
  SUBCASE("stride 2 size 2 among 12: intra (2,2) 76 vs inter c = 2, 80/2 = 40") {
    AxisLink l = axis_link(p, 12, 2, 2);
    CHECK(l.inside);
    CHECK(l.across);
    CHECK(l.groups_per_node == 2);
    CHECK(l.intra.busbw == 76 * GBps);
    CHECK(l.inter.busbw == rel(40 * GBps));
    double intra = 5e-6 * 2 + 1.0 * bytes / 76e9;
    double inter = 10e-6 * 2 + 1.0 * bytes / 40e9;
    CHECK(collective_time(Coll::AllReduce, bytes, l) == rel(std::max(intra, inter)));
  }
  SUBCASE("stride 3 size 4 among 12: across only, c = 3, 80/3") {
    AxisLink l = axis_link(p, 12, 3, 4);
    CHECK_FALSE(l.inside);
    CHECK(l.inter.busbw == rel(80 * GBps / 3));
    CHECK(collective_time(Coll::AllGather, bytes, l) == rel(10e-6 * 3 + 3.0 / 4 * bytes / (80e9 / 3)));
  }
}

TEST_CASE("comm: an axis prices each collective with that collective's own figures") {
  // The node's link measured apart for reduce-scatter (40 µs, 30 GB/s against
  // the joint 10 µs, 80 GB/s); 2 groups a node share it, so each gets half.
  MachineProfile p = fftest::perlmutter_like();
  const int rs = int(Coll::ReduceScatter);
  p.inter_node.by_op[rs] = true;
  p.inter_node.op_alpha_s[rs] = 40e-6;
  p.inter_node.op_busbw[rs] = 30e9;
  AxisLink l = axis_link(p, 16, 2, 4);  // {0,2,..} {1,3,..} per block: across nodes, 2 groups a node
  REQUIRE(l.across);
  REQUIRE(l.groups_per_node == 2);
  const double bytes = 8e6;
  CHECK(collective_time(Coll::ReduceScatter, bytes, l) == rel(40e-6 * 3 + 3.0 / 4 * bytes / 15e9));
  CHECK(collective_time(Coll::AllGather, bytes, l) == rel(10e-6 * 3 + 3.0 / 4 * bytes / 40e9));
  CHECK(collective_time(Coll::AllReduce, bytes, l) == rel(10e-6 * 6 + 6.0 / 4 * bytes / 40e9));
}

TEST_CASE("comm: a measured inter-node entry overrides node_busbw / c") {
  MachineProfile p = fftest::perlmutter_like();
  // Measured: 2 groups a node, size 4, 2 members on each node.
  p.inter = {{2, 4, {12e-6, 33e9}, 2}};
  AxisLink l = axis_link(p, 16, 2, 4);  // {0,2,4,6},{1,3,5,7}: node 0 holds 0,2 and 1,3: c = 2, m = 2
  CHECK(l.inter.busbw == 33 * GBps);
  CHECK(l.inter.alpha_s == 12e-6);
  CHECK(axis_link(p, 16, 4, 2).inter.busbw == rel(80 * GBps / 4));  // no entry for (4, 2, 1)
  // The same (c, size) measured with one member a node is another geometry.
  p.inter = {{2, 4, {12e-6, 33e9}}};
  CHECK(axis_link(p, 16, 2, 4).inter.busbw == rel(80 * GBps / 2));
}

TEST_CASE("comm: group_geometry counts the members one spanning group has on a node") {
  struct Case {
    long long total;
    int per_node;
    long long stride;
    int size, c, m;
    const char* why;
  };
  const Case cases[] = {
      {8, 2, 1, 8, 1, 2, "{0..7} on nodes 0..3, 2 each"},
      {8, 2, 1, 4, 1, 2, "{0..3} on nodes 0,1 and {4..7} on 2,3"},
      {8, 2, 4, 2, 2, 1, "{0,4},{1,5},{2,6},{3,7}; node 0 = {0,1} meets two"},
      {8, 2, 2, 4, 2, 1, "{0,2,4,6},{1,3,5,7}, one member of each on every node"},
      {16, 4, 2, 4, 2, 2, "{0,2,4,6} has 0,2 on node 0 and 4,6 on node 1"},
      {12, 4, 1, 3, 2, 2, "{3,4,5} has 4,5 on node 1, {6,7,8} 6,7"},
      {1024, 4, 1, 8, 1, 4, "each group on 2 nodes, 4 each"},
      {8, 4, 1, 2, 0, 0, "{0,1},{2,3},… inside nodes: nothing spans"},
  };
  for (const Case& k : cases) {
    CAPTURE(k.why);
    GroupGeometry geo = group_geometry(k.total, k.per_node, k.stride, k.size);
    CHECK(geo.any_across == (k.m > 0));
    CHECK(geo.groups_per_node == k.c);
    CHECK(geo.members_per_node == k.m);
  }
  CHECK_FALSE(group_geometry(8, 2, 1, 8).any_inside);
  CHECK(group_geometry(12, 4, 1, 3).any_inside);  // {0,1,2} and {9,10,11}
}

TEST_CASE("comm: an entry for groups with several members a node prices only such groups") {
  // 4 nodes of 2 ranks; node link 80 GB/s, α 10 µs. Measured: one group a
  // node, size 8, 2 members a node (grid 1,1,8,1's Z group): 20 GB/s, α 30 µs.
  MachineProfile p = fftest::toy_machine(2);
  p.inter_node = {10e-6, 80e9};
  p.inter = {{1, 8, {30e-6, 20e9}, 2}};
  const double bytes = 8e6;
  AxisLink l = axis_link(p, 8, 1, 8);
  REQUIRE(l.across);
  CHECK(l.groups_per_node == 1);
  CHECK(l.members_per_node == 2);
  CHECK(l.inter.busbw == 20 * GBps);
  CHECK(collective_time(Coll::AllGather, bytes, l) == rel(30e-6 * 7 + 7.0 / 8 * bytes / 20e9));
  CHECK(collective_time(Coll::AllReduce, bytes, l) == rel(30e-6 * 14 + 14.0 / 8 * bytes / 20e9));

  // Without that entry: the ring rule, node 80 GB/s shared by c = 1 group.
  MachineProfile none = p;
  none.inter.clear();
  AxisLink f = axis_link(none, 8, 1, 8);
  CHECK(f.inter.busbw == rel(80 * GBps));
  CHECK(collective_time(Coll::AllGather, bytes, f) == rel(10e-6 * 7 + 7.0 / 8 * bytes / 80e9));
  // An entry for the same (c, size) with one member a node does not apply either.
  none.inter = {{1, 8, {30e-6, 20e9}}};
  CHECK(axis_link(none, 8, 1, 8).inter.busbw == rel(80 * GBps));

  // Nor does the m = 2 entry price 8 ranks on 8 nodes of 1.
  MachineProfile one = p;
  one.gpus_per_node = 1;
  AxisLink o = axis_link(one, 8, 1, 8);
  CHECK(o.members_per_node == 1);
  CHECK(o.inter.busbw == rel(80 * GBps));
}

TEST_CASE("comm: a group inside a node that the intra table lacks uses intra_node.default") {
  MachineProfile p = fftest::toy_machine(6);
  p.intra_default = {5e-6, 50e9};
  p.intra = {{1, 2, {5e-6, 90e9}}, {2, 2, {5e-6, 76e9}}};
  // Size 3 is not in the table at all.
  AxisLink s1g3 = axis_link(p, 12, 1, 3);  // {0,1,2},{3,4,5} inside node 0
  CHECK(s1g3.inside);
  CHECK_FALSE(s1g3.across);
  CHECK(s1g3.intra.busbw == 50 * GBps);
}

// profiles/README.md: intra_node.default is "`alpha_us`, `busbw_GBps` of a group
// inside a node that `table` lacks" -- a stride-3 pair gets the default (50),
// not the nearest listed stride's figure (76): intra-node links are not uniform.
TEST_CASE("comm: an unlisted stride of a listed size uses intra_node.default") {
  MachineProfile p = fftest::toy_machine(6);
  p.intra_default = {5e-6, 50e9};
  p.intra = {{1, 2, {5e-6, 90e9}}, {2, 2, {5e-6, 76e9}}};
  AxisLink s3g2 = axis_link(p, 12, 3, 2);  // {0,3},{1,4},{2,5} inside node 0
  CHECK(s3g2.inside);
  CHECK_FALSE(s3g2.across);
  CHECK(s3g2.intra.busbw == 50 * GBps);
}

TEST_CASE("comm: LinkCache returns what axis_link computes") {
  const MachineProfile p = fftest::perlmutter_like();
  LinkCache cache(p, 16);
  for (auto [stride, size] : {std::pair{1LL, 4}, {2LL, 2}, {4LL, 2}, {2LL, 4}, {1LL, 8}, {4LL, 2}}) {
    AxisLink a = axis_link(p, 16, stride, size);
    const AxisLink& c = cache.get(stride, size);
    CHECK(c.size == a.size);
    CHECK(c.inside == a.inside);
    CHECK(c.across == a.across);
    CHECK(c.groups_per_node == a.groups_per_node);
    CHECK(c.members_per_node == a.members_per_node);
    CHECK(c.intra.busbw == a.intra.busbw);
    CHECK(c.inter.busbw == a.inter.busbw);
  }
}

TEST_CASE("comm: a tensor axis' groups of other pipeline stages do not share a node's link with its own") {
  // 8 ranks, 2 a node, stages alternate within a node (stride 1, 2 stages).
  // Size 4, stride 2: {0,2,4,6} is stage 0's, {1,3,5,7} stage 1's; each node
  // holds one member of each: 2 groups a node, 1 of each stage.
  CHECK(group_geometry(8, 2, 2, 4).groups_per_node == 2);
  CHECK(group_geometry(8, 2, 2, 4, Stages{1, 2}).groups_per_node == 1);
  // Stages in blocks of 4 ranks (stride 4): {0,2} and {1,3} (stage 0) share
  // nodes 0-1, {4,6} and {5,7} (stage 1) nodes 2-3: 2 a node either way.
  CHECK(group_geometry(8, 2, 2, 2, Stages{4, 2}).groups_per_node == 2);
  // 16 ranks, 4 a node, size 2 stride 4 ({r, r+4}), 4 stages of stride 1:
  // node 0 holds ranks 0-3, one group of each stage: 1; stages of stride 2
  // (ranks 0,1 stage 0; 2,3 stage 1): 2 of one stage.
  CHECK(group_geometry(16, 4, 4, 2).groups_per_node == 4);
  CHECK(group_geometry(16, 4, 4, 2, Stages{1, 4}).groups_per_node == 1);
  CHECK(group_geometry(16, 4, 4, 2, Stages{2, 2}).groups_per_node == 2);

  // Through the links: node_busbw / c with c = 1, the cache keyed by the stages too.
  const MachineProfile p = fftest::toy_machine(2);  // α 10 µs, 80 GB/s a node
  const AxisLink apart = axis_link(p, 8, 2, 4), staged = axis_link(p, 8, 2, 4, Stages{1, 2});
  CHECK(collective_time(Coll::AllReduce, 64e6, apart) == rel(hand_all_reduce(4, 64e6, 10e-6, 40e9)));
  CHECK(collective_time(Coll::AllReduce, 64e6, staged) == rel(hand_all_reduce(4, 64e6, 10e-6, 80e9)));
  LinkCache cache(p, 8);
  CHECK(cache.get(2, 4).groups_per_node == 2);
  CHECK(cache.get(2, 4, Stages{1, 2}).groups_per_node == 1);
  CHECK(cache.get(2, 4).groups_per_node == 2);
}
