// Scoring the model against measured runs (MODEL.md §8): the statistics on
// hand-computed cases, repeats folded into medians, the sample that keeps the
// placement check's pair, the engine's stricter split rule by hand, and the
// refit recovering known factors from times made with a scaled profile,
// scored on runs it did not see.
#include <algorithm>
#include <cmath>

#include "advisor/calibration/calibrate.hpp"
#include "advisor/calibration/refit.hpp"
#include "advisor/core/error.hpp"
#include "advisor/model/search.hpp"
#include "advisor/validation/validation_placement.hpp"
#include "advisor/validation/validation_plan.hpp"
#include "advisor/validation/validation_stats.hpp"
#include "tests/helpers.hpp"

using fftest::contains;
using fftest::rel;

TEST_CASE("MAPE is the mean relative error against the measured time") {
  // |110−100|/100, |90−100|/100, |300−200|/200 → (0.1 + 0.1 + 0.5) / 3.
  CHECK(ff::mape({110, 90, 300}, {100, 100, 200}) == rel(0.7 / 3));
  CHECK(ff::mape({5}, {5}) == 0);
}

TEST_CASE("the communication part: measured time less device time against predicted time less compute") {
  // Measured comm 10 − 6 = 4 and 20 − 5 = 15; predicted 9 − 4 = 5 and 18 − 6 = 12:
  // |5 − 4|/4 and |12 − 15|/15 → (0.25 + 0.2) / 2.
  CHECK(ff::comm_mape({9, 18}, {4, 6}, {10, 20}, {6, 5}) == rel(0.225));
  // A step no longer than its device time has no communication part to score.
  CHECK(std::isnan(ff::comm_mape({9, 18}, {4, 6}, {10, 20}, {10, 5})));
  CHECK(std::isnan(ff::comm_mape({}, {}, {}, {})));
  CHECK_THROWS_AS(ff::comm_mape({9}, {4, 6}, {10}, {6}), ff::InputError);
  CHECK(ff::comm_share(10, 6) == rel(0.4));
}

TEST_CASE("average ranks share the mean of the ranks a tie spans") {
  // Sorted 1, 1, 3, 4, 5: the two 1s take ranks 1 and 2 → 1.5 each.
  std::vector<double> r = ff::average_ranks({3, 1, 4, 1, 5});
  CHECK(r == std::vector<double>{3, 1.5, 4, 1.5, 5});
}

TEST_CASE("Spearman is Pearson of the average ranks, ties included") {
  // a = 1,2,2,3 → ranks 1, 2.5, 2.5, 4; b = 1,3,2,4 → ranks 1, 3, 2, 4; mean 2.5.
  // Deviations a: −1.5, 0, 0, 1.5; b: −1.5, 0.5, −0.5, 1.5.
  // Σab = 4.5, Σa² = 4.5, Σb² = 5 → 4.5 / √22.5 = √0.9.
  CHECK(ff::spearman({1, 2, 2, 3}, {1, 3, 2, 4}) == rel(std::sqrt(0.9)));
  CHECK(ff::spearman({1, 2, 3}, {30, 20, 10}) == rel(-1));
  CHECK(std::isnan(ff::spearman({1, 2, 3}, {7, 7, 7})));  // no ranking on one side
  CHECK(std::isnan(ff::spearman({1}, {1})));
}

TEST_CASE("Kendall tau-b corrects for ties on either side") {
  // Pairs of a = 1,2,2,3 and b = 1,3,2,4: (0,1) (0,2) (0,3) (1,3) (2,3)
  // concordant, (1,2) tied in a: C − D = 5, untied pairs 5 in a, 6 in b.
  CHECK(ff::kendall_tau_b({1, 2, 2, 3}, {1, 3, 2, 4}) == rel(5 / std::sqrt(30.0)));
  CHECK(ff::kendall_tau_b({1, 2, 3, 4}, {4, 3, 2, 1}) == rel(-1));
  // 1,2,3 against 1,3,2: (0,1) (0,2) concordant, (1,2) discordant → 1/3.
  CHECK(ff::kendall_tau_b({1, 2, 3}, {1, 3, 2}) == rel(1.0 / 3));
  CHECK(std::isnan(ff::kendall_tau_b({2, 2}, {1, 2})));
}

TEST_CASE("regret: the predicted-fastest configuration, measured, against the measured best") {
  ff::Regret r = ff::regret({1.0, 2.0, 3.0}, {1.2, 1.0, 1.5});
  CHECK(r.top_pick == 0);
  CHECK(r.measured_best == 1);
  CHECK(r.value == rel(0.2));
  // A predicted tie goes to the first; a right pick costs nothing.
  CHECK(ff::regret({1, 1, 2}, {2, 1, 3}).value == rel(1.0));
  CHECK(ff::regret({3, 1, 2}, {3, 1, 2}).value == 0);
  ff::Scores s = ff::score({110, 90, 300}, {100, 100, 200});
  CHECK(s.n == 3);
  CHECK(s.regret.top_pick == 1);
  CHECK(s.regret.value == 0);  // measured 100 and 100: the pick ties the best
  CHECK(fftest::input_error_of([] { ff::score({1}, {0}); }) != "");
  CHECK(fftest::input_error_of([] { ff::score({1, 2}, {1}); }) != "");
}

TEST_CASE("halves: sorted by key, alternately") {
  // Sorted: a(1) b(2) c(0) d(3) e(4) → A = a, c, e; B = b, d.
  auto h = ff::split_halves({"c", "a", "b", "d", "e"});
  CHECK(h[0] == std::vector<size_t>{1, 0, 4});
  CHECK(h[1] == std::vector<size_t>{2, 3});
}

TEST_CASE("repeats: each quantity the median over the repeats on its own, and the spread of the times") {
  // Times 0.10, 0.14, 0.12 → median 0.12, spread (0.14 − 0.10) / 0.12 = 1/3.
  // Compute 0.05, 0.03, 0.04 → 0.04 (from the third repeat, not the one whose
  // time is the median); comm x 0.01, 0.03, 0.02 → 0.02; data 0, 0.6, 0 → 0.
  ff::RepeatSummary s = ff::summarize_repeats({{0.10, 0.05, {0.01, 0, 0, 0}},
                                               {0.14, 0.03, {0.03, 0, 0, 0.6}},
                                               {0.12, 0.04, {0.02, 0, 0, 0}}});
  CHECK(s.n == 3);
  CHECK(s.median.time_s == rel(0.12));
  CHECK(s.median.compute_s == rel(0.04));
  CHECK(s.median.comm_s[0] == rel(0.02));
  CHECK(s.median.comm_s[3] == 0);
  CHECK(s.min_s == 0.10);
  CHECK(s.max_s == 0.14);
  CHECK(s.relative_spread == rel(1.0 / 3));
  // Two repeats (the 74 and 136 ms of one configuration on the emulated
  // cluster): the median is their mean, 105 ms; spread 62 / 105.
  ff::RepeatSummary two = ff::summarize_repeats({{0.074, 0.02, {}}, {0.136, 0.03, {}}});
  CHECK(two.median.time_s == rel(0.105));
  CHECK(two.median.compute_s == rel(0.025));
  CHECK(two.relative_spread == rel(0.062 / 0.105));
  // One repeat: itself, no spread.
  ff::RepeatSummary one = ff::summarize_repeats({{0.2, 0.1, {0.01, 0.02, 0.03, 0.04}}});
  CHECK(one.median.time_s == 0.2);
  CHECK(one.median.comm_s[2] == 0.03);
  CHECK(one.relative_spread == 0);
  CHECK(fftest::input_error_of([] { ff::summarize_repeats({}); }) != "");
  CHECK(fftest::input_error_of([] { ff::summarize_repeats({{0.1, 0, {}}, {0, 0, {}}}); }) != "");
}

TEST_CASE("resume: only the repeats not yet finished run") {
  CHECK(ff::missing_repeats({}, 3) == std::vector<int>{1, 2, 3});
  CHECK(ff::missing_repeats({1}, 3) == std::vector<int>{2, 3});  // a --repeats 1 report resumed with 3
  CHECK(ff::missing_repeats({3, 1}, 3) == std::vector<int>{2});  // repeat 2 failed: it runs again
  CHECK(ff::missing_repeats({1, 2, 3}, 2).empty());               // fewer asked than finished: all kept
  CHECK(ff::missing_repeats({5}, 1) == std::vector<int>{1});
}

TEST_CASE("the sample keeps the forced configurations, first when they would be left out") {
  using V = std::vector<size_t>;
  CHECK(ff::sample_with(10, 4, {}) == V{0, 1, 2, 3});
  CHECK(ff::sample_with(10, 4, {1, 2}) == V{0, 1, 2, 3});  // already in: nothing moves
  // Both left out: to the front, the tail makes room.
  CHECK(ff::sample_with(10, 4, {7, 8}) == V{7, 8, 0, 1});
  // The first in, the second not: right after the first.
  CHECK(ff::sample_with(10, 4, {2, 8}) == V{0, 1, 2, 8});
  CHECK(ff::sample_with(10, 4, {8, 2}) == V{8, 0, 1, 2});
  CHECK(ff::sample_with(10, 4, {8}) == V{8, 0, 1, 2});
  // More forced than room: the forced ones still.
  CHECK(ff::sample_with(10, 1, {7, 8}) == V{7, 8});
  // Everything sampled: the order as it is.
  CHECK(ff::sample_with(3, 10, {2, 0}) == V{0, 1, 2});
  // A wider sample holds a narrower one: a resumed, larger --max-configs extends it.
  V narrow = ff::sample_with(10, 3, {7, 8}), wide = ff::sample_with(10, 5, {7, 8});
  CHECK(narrow == V{7, 8, 0});
  CHECK(wide == V{7, 8, 0, 1, 2});
  CHECK(fftest::input_error_of([] { ff::sample_with(3, 2, {3}); }) != "");
}

TEST_CASE("bytes per step: each collective's buffer times its count, per micro-step or per step") {
  ff::Plan plan;
  plan.micro_steps = 4;
  // 1000 fp32 elements twice a micro-step on Z: 2 · 4 · 4000 = 32000 bytes;
  // 500 bf16 once a step on data: 1000; 10 fp32 once a micro-step on Z: 160.
  plan.comm.push_back({"fc1", "fwd weight all-gather", ff::Axis::Z, ff::Coll::AllGather, 1000, 4, 2, false});
  plan.comm.push_back({"fc1", "weight-grad all-reduce", ff::Axis::D, ff::Coll::AllReduce, 500, 2, 1, true});
  plan.comm.push_back({"fc2", "fwd weight all-gather", ff::Axis::Z, ff::Coll::AllGather, 10, 4, 1, false});
  ff::PerAxis<double> b = ff::bytes_per_step(plan);
  CHECK(b[0] == 0);
  CHECK(b[1] == 0);
  CHECK(b[2] == 32160);
  CHECK(b[int(ff::Axis::P)] == 0);
  CHECK(b[int(ff::Axis::D)] == 1000);
}

TEST_CASE("placement check: the top pick's heaviest axis inside a node against the same sent across") {
  // 8 ranks on 2 nodes of 4, grid 1,1,4,2: Z gathers every weight each
  // micro-step, data all-reduces a quarter of the gradients once a step, so
  // Z carries the most bytes. Z innermost (stride 1, size 4) keeps its groups
  // inside a node; data innermost puts Z at stride 2, {0, 2, 4, 6}: across.
  ff::MachineProfile p = fftest::toy_machine(4);
  ff::Job job{fftest::toy_model(), 8, 16, ff::Dtype::FP32};
  const ff::Grid g{1, 1, 4, 2};
  std::vector<ff::Config> both;
  for (const ff::Order& o : ff::distinct_orders(g)) both.push_back({g, o, 1, ff::Recompute::None, {}, ff::Dtype::FP32});
  REQUIRE(both.size() == 2);
  REQUIRE(ff::axis_stride(g, both[0].order, ff::Axis::Z) == 1);
  REQUIRE(ff::axis_stride(g, both[1].order, ff::Axis::Z) == 2);
  double inside_s = ff::predict(job, p, both[0]).estimate.time_s;
  double across_s = ff::predict(job, p, both[1]).estimate.time_s;
  REQUIRE(inside_s < across_s);

  ff::PlacementCheck pc = ff::placement_check(job, p, {both[1], both[0]});
  CHECK(pc.top_pick == both[0]);
  CHECK(pc.top_pick_s == inside_s);
  CHECK(pc.heavy_axis == ff::Axis::Z);
  CHECK(pc.heavy_bytes > 0);
  CHECK(pc.heavy_inside);
  REQUIRE(pc.has_counterpart);
  CHECK(pc.counterpart == both[1]);
  CHECK(pc.counterpart_s == across_s);
  CHECK(pc.not_applicable.empty());
  // The counterpart must be a candidate (validate passes every feasible
  // configuration, sampled or not): where the filters leave it out (--order
  // fixes the placement), the check is not applicable and says why, rather
  // than forcing a run nobody asked for.
  ff::PlacementCheck alone = ff::placement_check(job, p, {both[0]});
  CHECK_FALSE(alone.has_counterpart);
  CHECK(contains(alone.not_applicable, "filtered out (--order)"));

  // Pure data parallelism over both nodes: the heaviest axis already crosses.
  ff::Config dp{{1, 1, 1, 8}, {}, 1, ff::Recompute::None, {}, ff::Dtype::FP32};
  ff::PlacementCheck across = ff::placement_check(job, p, {dp});
  CHECK(across.heavy_axis == ff::Axis::D);
  CHECK_FALSE(across.heavy_inside);
  CHECK_FALSE(across.has_counterpart);
  CHECK(contains(across.not_applicable, "already crosses nodes"));
  // One node of 8: no placement crosses.
  ff::PlacementCheck one = ff::placement_check(job, fftest::toy_machine(8), {dp});
  CHECK(one.heavy_inside);
  CHECK_FALSE(one.has_counterpart);
  CHECK(contains(one.not_applicable, "one node"));
  CHECK(fftest::input_error_of([&] { ff::placement_check(job, p, {}); }) != "");
}

TEST_CASE("engine_split_problem: unpadded Z shards on top of the advisor's rules") {
  // H 6, heads 2, F 24, Vp 10. Blocks (G_x = G_y = 1): embedding 10·6 = 60,
  // qkv 6·18 = 108, attention-out 36, fc1 and fc2 144, LM head 60.
  ff::ModelSpec m{"m", 1, 6, 2, 24, 10, 10, 4};
  CHECK(ff::engine_split_problem(m, {1, 1, 1, 1}) == "");
  CHECK(ff::engine_split_problem(m, {1, 1, 4, 1}) == "");  // 60, 108, 36, 144 all % 4 = 0
  // G_z 5: the embedding's 60 divides, QKV's 108 does not.
  CHECK(ff::engine_split_problem(m, {1, 1, 5, 1}) == "qkv block of 108 values % G_z 5 != 0");
  // G_z 8: the first block, the embedding's 60, does not; the advisor pads it.
  CHECK(ff::engine_split_problem(m, {1, 1, 8, 1}) == "embedding block of 60 values % G_z 8 != 0");
  CHECK(ff::split_problem(ff::Job{m, 8, 8, ff::Dtype::FP32}, {1, 1, 8, 1}, 1) == "");
  // G_x 2, G_z 3: embedding (transposed) 10·3 = 30, qkv 3·18 = 54, attention-out
  // 6·3 = 18, fc1 3·24 = 72, fc2 24·3 = 72, LM head 3·10 = 30: all % 3 = 0.
  CHECK(ff::engine_split_problem(m, {2, 1, 3, 1}) == "");
  CHECK(ff::engine_split_problem(m, {4, 1, 1, 1}) == "hidden 6 % G_x 4 != 0");
  CHECK(ff::engine_split_problem(m, {1, 4, 1, 1}) == "heads 2 % G_y 4 != 0 (each Y rank owns whole heads)");
}

TEST_CASE("validate samples interleaved stages where Megatron's rules allow them, and only there") {
  // 4 blocks on 8 ranks: P in {1, 2, 4}; v = 2 needs P = 2 (4 % (P·2) = 0)
  // and micro-batches per pipeline a multiple of 2.
  ff::Job job{ff::ModelSpec{"m", 4, 16, 2, 64, 32, 32, 8}, 8, 16, ff::Dtype::FP32};
  ff::SearchOptions so;  // v in {1, 2}, as the search
  so.offload_on = so.shard_on = false;
  std::map<std::string, int> skipped;
  int interleaved = 0, plain_staged = 0;
  for (const auto& cs : ff::advisor::feasible_by_grid(job, fftest::toy_machine(8), so, skipped))
    for (const ff::Config& c : cs) {
      if (c.virtual_stages == 1) {
        plain_staged += c.grid.p > 1;
        continue;
      }
      ++interleaved;
      CHECK(c.virtual_stages == 2);
      CHECK(c.grid.p == 2);
      CHECK(ff::virtual_stages_problem(job, c.grid, c.micro_batch, 2).empty());
    }
  CHECK(interleaved > 0);
  CHECK(plain_staged > 0);
  so.virtual_stages = {1};  // validate --virtual-stages 1
  for (const auto& cs : ff::advisor::feasible_by_grid(job, fftest::toy_machine(8), so, skipped))
    for (const ff::Config& c : cs) CHECK(c.virtual_stages == 1);
}

namespace {

// A machine of CPU ranks, where compute, latency and bandwidth all weigh in
// the toy job's step: 10 GFLOP/s, 10 GB/s memory, links of a few GB/s, 4 a node.
ff::MachineProfile cpu_like() {
  ff::MachineProfile p = fftest::perlmutter_like();
  p.peak_flops_fp32 = p.peak_flops_bf16 = 10e9;
  p.hbm_bandwidth = 10e9;
  p.intra_default = {5e-6, 2e9};
  p.intra = {{1, 2, {5e-6, 2e9}}, {1, 4, {5e-6, 4e9}}, {2, 2, {5e-6, 2e9}}};
  p.inter_node = {10e-6, 1e9};
  p.overlap_efficiency = 0.2;
  return p;
}

// Every configuration of the toy job with micro-batch 1 and 2, recompute on
// and off, the given overlap flags: many shapes, orders and message sizes.
std::vector<ff::Config> configs(const ff::Job& job, bool with_overlap) {
  std::vector<ff::Config> out;
  for (const ff::Grid& g : ff::factorizations(job.gpus)) {
    if (!ff::split_problem(job, g, 2).empty()) continue;
    for (const ff::Order& o : ff::distinct_orders(g))
      for (int mb : {1, 2})
        for (bool rc : {false, true}) {
          ff::Overlap ov = with_overlap && (mb + rc) % 2 ? ff::Overlap{true, true, true} : ff::Overlap{};
          out.push_back({g, o, mb, rc ? ff::Recompute::Full : ff::Recompute::None, ov, ff::Dtype::FP32});
        }
  }
  return out;
}

// Every knob away from 1 (overlap from the base's 0.2).
ff::Factors known_truth() {
  ff::Factors t;
  t[ff::Knob::IntraBw] = 0.5;
  t[ff::Knob::InterBw] = 0.25;
  t[ff::Knob::Alpha] = 3;
  t[ff::Knob::Gemm] = 0.3;
  t[ff::Knob::Elementwise] = 0.6;
  t[ff::Knob::Overlap] = 0.3;
  return t;
}

std::vector<ff::MeasuredRun> measured_with(const ff::Job& job, const ff::MachineProfile& truth,
                                           const std::vector<ff::Config>& cs) {
  std::vector<ff::MeasuredRun> runs;
  for (const auto& c : cs) {
    ff::Estimate e = ff::predict(job, truth, c).estimate;
    runs.push_back({c, e.time_s, e.compute_s, e.exposed_comm_s, std::nullopt});
  }
  return runs;
}

}  // namespace

TEST_CASE("refit recovers known factors and predicts runs it did not see") {
  // 8 ranks on 2 nodes of 4: some axes inside a node, some across.
  ff::MachineProfile base = cpu_like();
  ff::Job job{fftest::toy_model(), 8, 16, ff::Dtype::FP32};
  const ff::Factors truth = known_truth();
  std::vector<ff::Config> cs = configs(job, true);
  std::vector<ff::MeasuredRun> all = measured_with(job, ff::apply_factors(base, truth), cs);

  // Fit on half the configurations (alternate ones), score on the other half.
  std::vector<std::string> keys;
  for (const auto& c : cs)
    keys.push_back(c.grid.str() + c.order.str() + std::to_string(c.micro_batch) + ff::recompute_name(c.recompute) +
                   c.overlap.str());
  auto halves = ff::split_halves(keys);
  std::vector<ff::MeasuredRun> fit_on, held_out;
  for (size_t i : halves[0]) fit_on.push_back(all[i]);
  for (size_t i : halves[1]) held_out.push_back(all[i]);
  REQUIRE(fit_on.size() > 20);

  ff::RefitResult r = ff::refit(job, base, fit_on);
  for (ff::Knob k : ff::kKnobs) {
    std::string knob = ff::knob_name(k);
    CAPTURE(knob);
    CHECK(r.fitted[size_t(k)]);
    CHECK_FALSE(r.at_bound[size_t(k)]);
    CHECK(r.factors[k] == doctest::Approx(truth[k]).epsilon(0.02).scale(0));
  }
  MESSAGE("evaluations " << r.evaluations << " rms " << r.rms_before << " -> " << r.rms_after);
  // Levenberg–Marquardt reaches a smooth minimum in tens of steps of 7
  // evaluations, and the Nelder–Mead round that confirms it takes a few
  // hundred; Nelder–Mead alone took 2,867 here.
  CHECK(r.evaluations < 1000);
  CHECK(r.rms_before > 0.3);
  CHECK(r.rms_after < 0.01);

  std::vector<double> raw, fitted, measured;
  ff::MachineProfile p = ff::apply_factors(base, r.factors);
  for (const auto& m : held_out) {
    raw.push_back(ff::predict(job, base, m.config).estimate.time_s);
    fitted.push_back(ff::predict(job, p, m.config).estimate.time_s);
    measured.push_back(m.time_s);
  }
  CHECK(ff::mape(raw, measured) > 0.3);
  CHECK(ff::mape(fitted, measured) < 0.01);
}

TEST_CASE("refit: a stage's blocked time is its messages and the bubble, as the engine counts it") {
  // The engine's time blocked on P is a stage's wait for its neighbour:
  // the stage messages and the pipeline's idle time together. Runs recorded
  // that way under a known profile must give that profile back; compared
  // with the messages alone, the bubble reads as slow links.
  ff::MachineProfile base = cpu_like();
  ff::Job job{fftest::toy_model(), 8, 16, ff::Dtype::FP32};
  const ff::Factors truth = known_truth();
  const ff::MachineProfile truth_profile = ff::apply_factors(base, truth);
  std::vector<ff::Config> cs;
  for (ff::Grid g : ff::factorizations(4)) {
    g.p = 2;
    if (!ff::split_problem(job, g, 2).empty()) continue;
    for (const ff::Order& o : ff::distinct_orders(g))
      for (int mb : {1, 2}) cs.push_back({g, o, mb, mb == 2 ? ff::Recompute::Full : ff::Recompute::None, ff::Overlap{mb == 2, mb == 2, mb == 2},
                                           ff::Dtype::FP32});
  }
  for (const ff::Config& c : configs(job, true)) cs.push_back(c);
  std::vector<ff::MeasuredRun> runs;
  double bubble = 0;
  for (const ff::Config& c : cs) {
    ff::Estimate e = ff::predict(job, truth_profile, c).estimate;
    ff::PerAxis<double> blocked = e.exposed_comm_s;
    blocked[int(ff::Axis::P)] += e.bubble_s;
    bubble += e.bubble_s;
    runs.push_back({c, e.time_s, e.compute_s, blocked, std::nullopt});
  }
  REQUIRE(bubble > 0);
  ff::RefitResult r = ff::refit(job, base, runs);
  for (ff::Knob k : ff::kKnobs) {
    std::string knob = ff::knob_name(k);
    CAPTURE(knob);
    // The runs are the model's own, so the fit lands within 1e-4 of the
    // truth; P compared with the messages alone moved intra_bw_scale and
    // elementwise_scale by 0.8-0.9%.
    CHECK(r.factors[k] == doctest::Approx(truth[k]).epsilon(0.002).scale(0));
  }
  CHECK(r.rms_after < 0.01);
}

TEST_CASE("refit holds what the runs cannot tell: one node, no overlap") {
  ff::MachineProfile base = cpu_like();
  base.gpus_per_node = 8;  // 8 ranks, one node: nothing crosses
  base.overlap_efficiency = 0.4;
  ff::Job job{fftest::toy_model(), 8, 16, ff::Dtype::FP32};
  ff::Factors truth = ff::identity_factors(base);
  truth[ff::Knob::IntraBw] = 0.5;
  truth[ff::Knob::Gemm] = 2;
  ff::RefitResult r = ff::refit(job, base, measured_with(job, ff::apply_factors(base, truth), configs(job, false)));
  CHECK_FALSE(r.fitted[size_t(ff::Knob::InterBw)]);
  CHECK(contains(r.held_because[size_t(ff::Knob::InterBw)], "crosses nodes"));
  CHECK(r.factors[ff::Knob::InterBw] == 1);
  CHECK_FALSE(r.fitted[size_t(ff::Knob::Overlap)]);
  CHECK(r.factors[ff::Knob::Overlap] == 0.4);  // the base's, untouched
  CHECK(r.factors[ff::Knob::IntraBw] == doctest::Approx(0.5).epsilon(0.02).scale(0));
  CHECK(r.factors[ff::Knob::Gemm] == doctest::Approx(2).epsilon(0.02).scale(0));
  CHECK(fftest::input_error_of([&] { ff::refit(job, base, {}); }) != "");
}

TEST_CASE("a fitted profile loads and prices as the fitted factors say") {
  nlohmann::json base = ff::profile_json("perlmutter");
  ff::MachineProfile m = ff::machine_from_json(base, "perlmutter");
  ff::RefitResult r;
  r.factors = ff::identity_factors(m);
  r.factors[ff::Knob::IntraBw] = 0.5;
  r.factors[ff::Knob::InterBw] = 0.25;
  r.factors[ff::Knob::Alpha] = 2;
  r.factors[ff::Knob::Gemm] = 3;  // above 1: the peak moves, the efficiency table stays within (0, 1]
  r.factors[ff::Knob::Elementwise] = 0.8;
  r.factors[ff::Knob::Overlap] = 0.3;
  r.fitted.fill(true);
  nlohmann::json j = ff::fitted_profile_json(base, r, "fitted-test", {{"report", "r.json"}});
  ff::MachineProfile f = ff::machine_from_json(j, "fitted");
  CHECK(j["fitted"]["kind"] == "fitted");
  CHECK(j["fitted"]["source"]["report"] == "r.json");
  CHECK(j["intra_node"]["kind"] == "fitted");
  CHECK(f.name == "fitted-test");
  CHECK(f.overlap_efficiency == 0.3);
  CHECK(f.peak_flops_fp32 == rel(3 * m.peak_flops_fp32));
  CHECK(f.inter_node.busbw == rel(0.25 * m.inter_node.busbw));
  CHECK(f.intra_default.alpha_s == rel(2 * m.intra_default.alpha_s));
  ff::Job job{ff::load_model("gpt-5b"), 64, 512, ff::Dtype::BF16};
  ff::Config c{{2, 2, 4, 4}, ff::parse_order("xyzd"), 1, ff::Recompute::Full, ff::Overlap{true, true, true}, ff::Dtype::BF16};
  CHECK(ff::predict(job, f, c).estimate.time_s == rel(ff::predict(job, ff::apply_factors(m, r.factors), c).estimate.time_s, 1e-9));
}

TEST_CASE("a fitted profile's measured curves: latency by the α factor, the rest by the bandwidth's") {
  nlohmann::json base = ff::profile_json("perlmutter");
  // An intra-node entry of size g with an all-reduce measured at 1 and 4 KiB:
  // 100 and 400 µs, α 10 µs, so 2(g − 1)·10 µs of each is latency.
  nlohmann::json& e = base["intra_node"]["table"][0];
  const int g = e["size"].get<int>();
  e["by_op"] = {{"all-reduce", {{"alpha_us", 10}, {"busbw_GBps", 100}, {"curve", {{1024, 100}, {4096, 400}}}}}};
  ff::MachineProfile m = ff::machine_from_json(base, "perlmutter+curve");
  ff::RefitResult r;
  r.factors = ff::identity_factors(m);
  r.factors[ff::Knob::IntraBw] = 2;
  r.factors[ff::Knob::Alpha] = 0.5;
  r.fitted.fill(true);
  nlohmann::json j = ff::fitted_profile_json(base, r, "fitted-curve", {{"report", "r.json"}});
  const double lat = 2.0 * (g - 1) * 10;
  const nlohmann::json& curve = j["intra_node"]["table"][0]["by_op"]["all-reduce"]["curve"];
  CHECK(curve[0][1].get<double>() == rel(lat * 0.5 + (100 - lat) / 2));
  CHECK(curve[1][1].get<double>() == rel(lat * 0.5 + (400 - lat) / 2));
  // The written profile prices that collective as the factors applied in memory.
  ff::MachineProfile f = ff::machine_from_json(j, "fitted");
  const ff::LinkParams& written = f.intra[0].link;
  ff::LinkParams scaled = m.intra[0].link;
  ff::scale_link(scaled, 2, 0.5);
  for (double bytes : {512.0, 2048.0, 8192.0})
    CHECK(ff::collective_time(ff::Coll::AllReduce, g, bytes, written) ==
          rel(ff::collective_time(ff::Coll::AllReduce, g, bytes, scaled), 1e-9));
}

TEST_CASE("out of sample: each half is scored by the fit of the other, never its own") {
  ff::MachineProfile base = cpu_like();
  ff::Job job{fftest::toy_model(), 8, 16, ff::Dtype::FP32};
  std::vector<ff::Config> cs = configs(job, true);
  std::vector<ff::MeasuredRun> runs = measured_with(job, ff::apply_factors(base, known_truth()), cs);
  std::vector<std::string> keys;
  for (size_t i = 0; i < cs.size(); ++i) keys.push_back(std::string(1, 'k').append(std::to_string(1000 + i)));  // halves: even, odd i

  ff::OutOfSample clean = ff::out_of_sample(job, base, runs, keys);
  for (int h = 0; h < 2; ++h) {
    const auto& half = clean.halves[h];
    CHECK(half.fit_on.size() + half.scored_on.size() == runs.size());
    for (size_t i : half.scored_on)
      CHECK(std::find(half.fit_on.begin(), half.fit_on.end(), i) == half.fit_on.end());
    CHECK(half.fit.factors[ff::Knob::Gemm] == doctest::Approx(0.3).epsilon(0.02).scale(0));
    CHECK(half.raw.mape > 0.3);
    CHECK(half.fitted.mape < 0.01);
  }
  CHECK(clean.halves[0].fit_on == clean.halves[1].scored_on);
  CHECK(clean.pooled_raw.n == runs.size());
  CHECK(clean.pooled_fitted.mape < 0.01);

  // Spoil one run of half B (odd index): the fit on A, which scores it, does
  // not move; the spoiled run shows up as error there.
  runs[1].time_s *= 3;
  ff::OutOfSample spoiled = ff::out_of_sample(job, base, runs, keys);
  CHECK(spoiled.halves[0].fit.factors.v == clean.halves[0].fit.factors.v);
  CHECK(spoiled.halves[0].fitted.mape > 0.5 * (2.0 / 3) / double(spoiled.halves[0].scored_on.size()));
  CHECK(fftest::input_error_of([&] {
          ff::out_of_sample(job, base, {runs.begin(), runs.begin() + 3}, {keys.begin(), keys.begin() + 3});
        }) != "");
}
