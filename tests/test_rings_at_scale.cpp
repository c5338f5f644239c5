// Rings at scale (MODEL.md §2): the at-scale fit held against published
// measurements it was not fitted on. The reference is NCCL 2.21.5's flat
// all-gather on Perlmutter, 4 A100s a node, ranks contiguous (so 4 members a
// node, one group), bf16 torch all_gather_into_tensor, mean of the last 10 of
// 20 iterations: the PCCL authors' benchmark logs (Singh and Bhatele,
// github.com/axonn-ai/sc2025-pccl-reproducer, data/perlmutter/pm_all_gather,
// present at commits cfad79d..30dec9bd; "The Big Send-off", arXiv 2504.18658).
// Sizes are the logs' MB (2^20 bytes: torch sizes the tensors in MiB).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "advisor/calibration/calibrate.hpp"
#include "advisor/core/measurement.hpp"
#include "advisor/model/comm_model.hpp"
#include "tests/helpers.hpp"

namespace {

constexpr double kMiB = 1048576;

// A published timing table: a row per GPU count, a column per size, ms.
struct TimingTable {
  ff::Coll op;
  int members_per_node;  // ranks contiguous: a node's GPUs in one ring
  std::vector<int> gpus;
  std::vector<double> sizes_mib;
  std::vector<std::vector<double>> ms;
};

const TimingTable kPerlmutter = {ff::Coll::AllGather, 4, {16, 32, 64, 128, 256, 512, 1024}, {1, 16, 64, 256, 1024},
                                 {{0.22, 0.47, 1.14, 4.45, 16.25},
                                  {0.41, 0.78, 1.29, 4.39, 17.14},
                                  {0.53, 1.26, 1.63, 4.62, 17.36},
                                  {0.97, 1.82, 2.81, 4.97, 17.56},
                                  {1.67, 2.98, 4.82, 6.74, 19.13},
                                  {3.48, 5.34, 6.65, 10.26, 20.23},
                                  {6.37, 7.98, 10.84, 18.55, 26.56}}};

// The rows of `t` on min_gpus … max_gpus.
std::vector<ff::CollectiveSample> rows_of(const TimingTable& t, int min_gpus, int max_gpus) {
  std::vector<ff::CollectiveSample> out;
  for (size_t i = 0; i < t.gpus.size(); ++i) {
    if (t.gpus[i] < min_gpus || t.gpus[i] > max_gpus) continue;
    for (size_t j = 0; j < t.sizes_mib.size(); ++j) {
      ff::CollectiveSample s;
      s.op = t.op;
      s.bytes = t.sizes_mib[j] * kMiB;
      s.times_s = {t.ms[i][j] * 1e-3};
      s.geometry.inter = true;
      s.geometry.size = t.gpus[i];
      s.geometry.members_per_node = t.members_per_node;
      out.push_back(s);
    }
  }
  return out;
}

std::vector<ff::CollectiveSample> samples(int min_gpus, int max_gpus) { return rows_of(kPerlmutter, min_gpus, max_gpus); }

// |predicted/measured − 1| of every sample.
std::vector<double> errors(const std::vector<ff::CollectiveSample>& rows, const ff::LinkParams& link) {
  std::vector<double> e;
  for (const auto& s : rows)
    e.push_back(std::abs(ff::collective_time(s.op, s.geometry.size, s.bytes, link) / s.median_s() - 1));
  return e;
}

}  // namespace

TEST_CASE("rings at scale: fitted up to 64 nodes, the 128- and 256-node rows priced within 25%") {
  const ff::LinkFit fit = ff::fit_rings_at_scale(samples(16, 256));
  const ff::LinkParams& l = fit.link;
  MESSAGE("call " << l.call_s * 1e6 << " us, alpha " << l.alpha_s * 1e6 << " us, LL alpha " << l.ll_alpha_s * 1e6
                  << " us at " << l.ll_bw_fraction << " of busbw " << l.busbw / 1e9 << " GB/s, rel rms "
                  << fit.rel_rms);
  // What NCCL's own tuner assumes on this machine (its printed table): 14 µs
  // per inter-node ring step for Simple, 2.7 µs for LL; the link ~100 GB/s a
  // node in raw NIC capacity. A fit outside these bounds is not that machine.
  CHECK(l.alpha_s > 5e-6);
  CHECK(l.alpha_s < 20e-6);
  CHECK(l.ll_alpha_s > 0);
  CHECK(l.ll_alpha_s < l.alpha_s);
  CHECK(l.busbw > 40e9);
  CHECK(l.busbw < 100e9);
  CHECK(l.call_s < 200e-6);
  // LL moves 4 bytes of data in each 8-byte line, so at most half the wire;
  // NCCL's tuner on this machine prices it at half Simple's busbw or less.
  CHECK(l.ll_bw_fraction > 0);
  CHECK(l.ll_bw_fraction <= 0.5);

  const auto held_out = samples(512, 1024);
  REQUIRE(held_out.size() == 10);
  const std::vector<double> e = errors(held_out, l);
  const double med = ff::median(e), worst = *std::max_element(e.begin(), e.end());
  MESSAGE("held out (128 and 256 nodes): median |error| " << med * 100 << "%, worst " << worst * 100 << "%");
  CHECK(worst <= 0.25);
  CHECK(med <= 0.10);

  // The same rows at the nominal link the bundled profile had before (α
  // 10 µs, 80 GB/s a node, one protocol, no call cost): worse at the edges.
  ff::LinkParams nominal;
  nominal.alpha_s = 10e-6, nominal.busbw = 80e9;
  const std::vector<double> before = errors(held_out, nominal);
  CHECK(*std::max_element(before.begin(), before.end()) > 0.5);
}

TEST_CASE("rings at scale: the bundled perlmutter node link is the fit over all 35 rows") {
  const ff::LinkFit fit = ff::fit_rings_at_scale(samples(16, 1024));
  const ff::LinkParams& l = fit.link;
  MESSAGE("all rows: call " << l.call_s * 1e6 << " us, alpha " << l.alpha_s * 1e6 << " us, LL alpha "
                            << l.ll_alpha_s * 1e6 << " us at " << l.ll_bw_fraction << ", busbw " << l.busbw / 1e9
                            << " GB/s, rel rms " << fit.rel_rms);
  const ff::LinkParams& bundled = ff::load_machine("perlmutter").inter_node;  // one ring a node: c = 1
  // Provenance, not accuracy (the held-out case above checks that against
  // the logs): the profile carries this fit, rounded as its source states.
  CHECK(bundled.call_s == fftest::rel(l.call_s, 0.01));
  CHECK(bundled.alpha_s == fftest::rel(l.alpha_s, 0.01));
  CHECK(bundled.ll_alpha_s == fftest::rel(l.ll_alpha_s, 0.01));
  CHECK(bundled.ll_bw_fraction == fftest::rel(l.ll_bw_fraction, 0.01));
  CHECK(bundled.busbw == fftest::rel(l.busbw, 0.01));
}

TEST_CASE("rings at scale: exact timings of the model give its parameters back") {
  for (const double fraction : {0.5, 0.2}) {  // LL at half the wire, and at NCCL-on-Slingshot's share
    CAPTURE(fraction);
    ff::LinkParams truth;
    truth.call_s = 50e-6, truth.alpha_s = 12e-6, truth.ll_alpha_s = 6e-6, truth.busbw = 60e9;
    std::vector<ff::CollectiveSample> rows;
    for (int g : {8, 16, 32, 64, 128})
      for (double mib : {0.25, 1.0, 4.0, 16.0, 64.0, 256.0}) {
        ff::CollectiveSample s;
        s.op = ff::Coll::ReduceScatter;
        s.bytes = mib * kMiB;
        s.geometry.inter = true;
        s.geometry.size = g;
        // By hand: call + min(α·(g−1) + (g−1)/g·S/β, α_LL·(g−1) + (g−1)/g·S/(fraction·β)).
        const double steps = g - 1, wire = (g - 1.0) / g * s.bytes / truth.busbw;
        s.times_s = {truth.call_s + std::min(truth.alpha_s * steps + wire, truth.ll_alpha_s * steps + wire / fraction)};
        rows.push_back(s);
      }
    const ff::LinkFit fit = ff::fit_rings_at_scale(rows);
    CHECK(fit.link.call_s == fftest::rel(truth.call_s, 1e-6));
    CHECK(fit.link.alpha_s == fftest::rel(truth.alpha_s, 1e-6));
    CHECK(fit.link.ll_alpha_s == fftest::rel(truth.ll_alpha_s, 1e-6));
    CHECK(fit.link.ll_bw_fraction == fftest::rel(fraction, 1e-6));
    CHECK(fit.link.busbw == fftest::rel(truth.busbw, 1e-6));
    CHECK(fit.rel_rms < 1e-9);
  }
}

TEST_CASE("rings at scale: one span, or too few points, is refused") {
  auto one_span = samples(64, 64);
  CHECK(fftest::contains(fftest::input_error_of([&] { ff::fit_rings_at_scale(one_span); }), "measure several spans"));
  auto two = samples(16, 32);
  two.resize(2);
  CHECK(fftest::contains(fftest::input_error_of([&] { ff::fit_rings_at_scale(two); }), "at least 3 points"));
}

namespace {

// Frontier, RCCL's flat reduce-scatter, 8 GCDs a node, ranks contiguous: the
// same authors' logs (data/frontier/fr_reduce_scatter).
const TimingTable kFrontier = {ff::Coll::ReduceScatter, 8, {16, 32, 64, 128, 256, 512, 1024}, {16, 64, 256, 1024},
                               {{0.55, 0.94, 3.31, 12.86},
                                {0.93, 1.15, 3.46, 13.10},
                                {2.04, 2.06, 3.66, 13.40},
                                {3.52, 3.58, 4.41, 13.77},
                                {4.38, 6.95, 7.96, 14.51},
                                {10.61, 17.29, 16.67, 17.31},
                                {9.71, 27.20, 27.51, 31.62}}};

// RCCL's pathology on Frontier (2025 stack, libfabric's eager/rendezvous
// switch; the logs' folders are named eager_v_rdvz): 10-40 times slower when
// each rank's chunk is 64-256 KiB. No ring model prices it; its rows are
// named and left out.
bool rccl_pathology(const ff::CollectiveSample& s) {
  const double chunk = s.bytes / s.geometry.size;
  return chunk >= 64 * 1024 && chunk <= 256 * 1024;
}

std::vector<ff::CollectiveSample> frontier(int min_gcds, int max_gcds, std::vector<ff::CollectiveSample>* left_out) {
  std::vector<ff::CollectiveSample> out;
  for (const auto& s : rows_of(kFrontier, min_gcds, max_gcds)) (rccl_pathology(s) ? *left_out : out).push_back(s);
  return out;
}

}  // namespace

TEST_CASE("rings at scale: Frontier's RCCL reduce-scatter fitted up to 16 nodes, 32-128 nodes priced") {
  std::vector<ff::CollectiveSample> left_out;
  const ff::LinkFit fit = ff::fit_rings_at_scale(frontier(16, 128, &left_out));
  const ff::LinkParams& l = fit.link;
  MESSAGE("Frontier: call " << l.call_s * 1e6 << " us, alpha " << l.alpha_s * 1e6 << " us, LL alpha "
                            << l.ll_alpha_s * 1e6 << " us, busbw " << l.busbw / 1e9 << " GB/s, rel rms " << fit.rel_rms);
  // Slingshot-11's four 25 GB/s NICs a node bound the link; RCCL's published
  // per-step latency on Frontier is 20-40 µs.
  CHECK(l.busbw > 40e9);
  CHECK(l.busbw < 100e9);
  CHECK(l.alpha_s > 5e-6);
  CHECK(l.alpha_s < 60e-6);
  const auto held_out = frontier(256, 1024, &left_out);
  std::string named;
  for (const auto& s : left_out)
    named += " " + std::to_string(int(s.bytes / kMiB)) + " MiB/" + std::to_string(s.geometry.size);
  MESSAGE("left out (RCCL's 64-256 KiB chunks):" << named);
  CHECK(left_out.size() == 7);
  const std::vector<double> e = errors(held_out, l);
  for (size_t i = 0; i < held_out.size(); ++i)
    if (e[i] > 0.25)
      MESSAGE("outlier: " << held_out[i].bytes / kMiB << " MiB on " << held_out[i].geometry.size << " GCDs, |error| "
                          << e[i] * 100 << "%");
  const double med = ff::median(e), worst = *std::max_element(e.begin(), e.end());
  MESSAGE("held out (32-128 nodes, " << held_out.size() << " rows): median |error| " << med * 100 << "%, worst "
                                    << worst * 100 << "%");
  CHECK(med <= 0.20);
}

// The same logs' hybrid runs (data/perlmutter/pm_all_gather_2, the
// hybrid-nccl-nccl form): an NCCL all-gather of S/4 in 4 concurrent groups
// of one GPU a node, then the intra-node all-gather of S, then a reorder in
// Python: an upper bound on the two-level form (MODEL.md §2), which the
// advisor prices with the bundled perlmutter profile as fitted on flat rings.
TEST_CASE("two-level collectives: the hybrid all-gathers priced at or under their times, and chosen where they pay") {
  ff::MachineProfile p = ff::load_machine("perlmutter");
  p.collectives = ff::CollectiveForm::TwoLevel;
  const std::vector<int> nodes = {16, 32, 64, 128};
  const std::vector<double> sizes = {1, 16, 128, 1024};
  const std::vector<std::vector<double>> hybrid_ms = {
      {0.39, 1.28, 3.03, 22.39}, {0.57, 1.27, 3.31, 22.95}, {0.89, 1.30, 3.60, 23.08}, {1.39, 2.01, 9.64, 24.19}};
  std::vector<double> err;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const int g = 4 * nodes[i];
    const ff::AxisLink link = ff::axis_link(p, g, 1, g);  // the whole job one group, 4 ranks a node
    REQUIRE(link.two_level);
    REQUIRE(link.two_level->members == 4);
    REQUIRE(link.two_level->nodes == nodes[i]);
    ff::AxisLink rings = link;
    rings.two_level = nullptr;
    for (size_t j = 0; j < sizes.size(); ++j) {
      const double S = sizes[j] * kMiB, measured = hybrid_ms[i][j] * 1e-3;
      const double two = ff::two_level_time(ff::Coll::AllGather, S, link);
      const double ring = ff::collective_time(ff::Coll::AllGather, S, rings);
      CAPTURE(nodes[i]);
      CAPTURE(sizes[j]);
      CHECK(two <= measured);  // the logs' form adds a reorder and allocation
      err.push_back(std::abs(two / measured - 1));
      CHECK(ff::collective_time(ff::Coll::AllGather, S, link) == std::min(ring, two));
      // Measured, the hybrid beat the flat ring 1.4-2.7x at 1 and 16 MB on
      // 32-128 nodes (kPerlmutter's rows of 128-512 GPUs): priced, too.
      if (sizes[j] <= 16 && nodes[i] >= 32) CHECK(ring / two >= 1.4);
      // At 1 GB the hybrid was slower on every node count: the form claims
      // no gain worth more than a tenth there.
      if (sizes[j] == 1024) CHECK(two >= 0.9 * ring);
    }
  }
  std::sort(err.begin(), err.end());
  CHECK((err[7] + err[8]) / 2 <= 0.25);  // median of 16 under the upper bound
}

TEST_CASE("two-level collectives: by hand on a toy machine, and only where the groups hold several ranks a node") {
  // 4 GPUs a node, 5 µs and 100 GB/s inside, a node's 80 GB/s across at
  // 10 µs shared by its crossing groups; 8 ranks in one group: two nodes of 4.
  ff::MachineProfile p = fftest::toy_machine(4);
  p.collectives = ff::CollectiveForm::TwoLevel;
  const ff::AxisLink l = ff::axis_link(p, 8, 1, 8);
  REQUIRE(l.two_level);
  using fftest::hand_all_reduce, fftest::hand_gather_scatter, fftest::rel;
  for (const double S : {64 * kMiB, 64.0 * 1024}) {
    CAPTURE(S);
    // Inside: 4 ranks at 100 GB/s. Across: groups of 2 (one GPU a node),
    // all 4 of a node's GPUs crossing at once, 20 GB/s each.
    const double ag = hand_gather_scatter(2, S / 4, 10e-6, 20e9) + hand_gather_scatter(4, S, 5e-6, 100e9);
    const double ar = hand_gather_scatter(4, S, 5e-6, 100e9) + hand_all_reduce(2, S / 4, 10e-6, 20e9) +
                      hand_gather_scatter(4, S, 5e-6, 100e9);
    CHECK(ff::two_level_time(ff::Coll::AllGather, S, l) == rel(ag, 1e-12));
    CHECK(ff::two_level_time(ff::Coll::ReduceScatter, S, l) == rel(ag, 1e-12));
    CHECK(ff::two_level_time(ff::Coll::AllReduce, S, l) == rel(ar, 1e-12));
    // Each call the cheaper: the ring (8 steps of 10 µs at the node's 80
    // GB/s) for 64 MiB (804 µs against 948), two-level for 64 KiB (25 µs
    // against 71).
    const double ring = hand_gather_scatter(8, S, 10e-6, 80e9);
    CHECK(ff::collective_time(ff::Coll::AllGather, S, l) == rel(std::min(ring, ag), 1e-12));
    CHECK((S > 1e6 ? ring < ag : ag < ring));
  }
  // One rank a node already (stride 4), inside a node, or rings asked for: none.
  CHECK_FALSE(ff::axis_link(p, 32, 4, 8).two_level);
  CHECK_FALSE(ff::axis_link(p, 8, 1, 4).two_level);
  p.collectives = ff::CollectiveForm::Ring;
  CHECK_FALSE(ff::axis_link(p, 8, 1, 8).two_level);
}

TEST_CASE("PAT: by hand on a toy machine, only for one GPU a node, all-gathers and reduce-scatters") {
  // 4 GPUs a node, a node's 80 GB/s across at 10 µs; 32 ranks, groups of 8 at
  // stride 4: one GPU on each of 8 nodes, 4 groups sharing a node (20 GB/s).
  ff::MachineProfile p = fftest::toy_machine(4);
  p.collectives = ff::CollectiveForm::Pat;
  const ff::AxisLink l = ff::axis_link(p, 32, 4, 8);
  REQUIRE(l.pat);
  using fftest::hand_all_reduce, fftest::hand_gather_scatter, fftest::rel;
  // NCCL's tuner (2.24+): 8 µs + ⌊log2 8⌋ = 3 levels of 10/3.5 µs + 2.8 µs
  // for each of the 8 ranks = 38.971 µs, then the buffer at 0.75 × 20 GB/s.
  const double latency = 8e-6 + 3 * 10e-6 / 3.5 + 8 * 2.8e-6;
  for (const double S : {64.0 * 1024, 64 * kMiB}) {
    CAPTURE(S);
    const double pat = latency + S / 15e9, ring = hand_gather_scatter(8, S, 10e-6, 20e9);
    CHECK(ff::pat_time(8, S, 10e-6, 20e9, 0) == rel(pat, 1e-12));
    // 64 KiB: PAT's 43.3 µs against the ring's 72.9; 64 MiB: the ring's
    // 3,006 µs against PAT's 4,513.
    CHECK((S < 1e6 ? pat < ring : ring < pat));
    CHECK(ff::collective_time(ff::Coll::AllGather, S, l) == rel(std::min(ring, pat), 1e-12));
    CHECK(ff::collective_time(ff::Coll::ReduceScatter, S, l) == rel(std::min(ring, pat), 1e-12));
    // NCCL runs no PAT all-reduce.
    CHECK(ff::collective_time(ff::Coll::AllReduce, S, l) == rel(hand_all_reduce(8, S, 10e-6, 20e9), 1e-12));
  }
  // Two GPUs a node in each group (stride 2), or rings asked for: no PAT.
  CHECK_FALSE(ff::axis_link(p, 32, 2, 8).pat);
  p.collectives = ff::CollectiveForm::Ring;
  CHECK_FALSE(ff::axis_link(p, 32, 4, 8).pat);
}
