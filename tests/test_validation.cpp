// Scoring the model against measured runs (DESIGN §8): the statistics on
// hand-computed cases, the engine's stricter split rule by hand, and the
// refit recovering known factors from times made with a scaled profile,
// scored on runs it did not see.
#include <algorithm>
#include <cmath>

#include "calibrate.hpp"
#include "helpers.hpp"
#include "refit.hpp"
#include "search.hpp"
#include "validation_stats.hpp"

using fftest::contains;
using fftest::rel;

TEST_CASE("MAPE is the mean relative error against the measured time") {
  // |110−100|/100, |90−100|/100, |300−200|/200 → (0.1 + 0.1 + 0.5) / 3.
  CHECK(ff::mape({110, 90, 300}, {100, 100, 200}) == rel(0.7 / 3));
  CHECK(ff::mape({5}, {5}) == 0);
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
          out.push_back({g, o, mb, rc, ov, ff::Dtype::FP32});
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
    runs.push_back({c, e.time_s, e.compute_s, e.exposed_comm_s});
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
    keys.push_back(c.grid.str() + c.order.str() + std::to_string(c.micro_batch) + (c.recompute ? "r" : "") +
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
    CHECK(r.factors[k] == doctest::Approx(truth[k]).epsilon(0.02));
  }
  MESSAGE("evaluations " << r.evaluations << " rms " << r.rms_before << " -> " << r.rms_after);
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
  CHECK(r.factors[ff::Knob::IntraBw] == doctest::Approx(0.5).epsilon(0.02));
  CHECK(r.factors[ff::Knob::Gemm] == doctest::Approx(2).epsilon(0.02));
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
  ff::Config c{{2, 2, 4, 4}, ff::parse_order("xyzd"), 1, true, ff::Overlap{true, true, true}, ff::Dtype::BF16};
  CHECK(ff::predict(job, f, c).estimate.time_s == rel(ff::predict(job, ff::apply_factors(m, r.factors), c).estimate.time_s, 1e-9));
}

TEST_CASE("out of sample: each half is scored by the fit of the other, never its own") {
  ff::MachineProfile base = cpu_like();
  ff::Job job{fftest::toy_model(), 8, 16, ff::Dtype::FP32};
  std::vector<ff::Config> cs = configs(job, true);
  std::vector<ff::MeasuredRun> runs = measured_with(job, ff::apply_factors(base, known_truth()), cs);
  std::vector<std::string> keys;
  for (size_t i = 0; i < cs.size(); ++i) keys.push_back("k" + std::to_string(1000 + i));  // halves: even, odd i

  ff::OutOfSample clean = ff::out_of_sample(job, base, runs, keys);
  for (int h = 0; h < 2; ++h) {
    const auto& half = clean.halves[h];
    CHECK(half.fit_on.size() + half.scored_on.size() == runs.size());
    for (size_t i : half.scored_on)
      CHECK(std::find(half.fit_on.begin(), half.fit_on.end(), i) == half.fit_on.end());
    CHECK(half.fit.factors[ff::Knob::Gemm] == doctest::Approx(0.3).epsilon(0.02));
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
