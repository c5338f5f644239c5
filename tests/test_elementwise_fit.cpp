// The element-wise efficiency fitted to measured engine steps. The "measured"
// steps are made with the cost model at a chosen efficiency, so these tests
// show the fit recovers a known value and refuses what it cannot explain;
// whether the model matches the engine is what validation runs measure.
#include <doctest/doctest.h>

#include "advisor/calibration/calibrate.hpp"
#include "advisor/calibration/elementwise_fit.hpp"
#include "advisor/model/prediction.hpp"
#include "tests/helpers.hpp"

using fftest::rel;

namespace {

double model_compute(ff::MachineProfile p, double eff, const ff::ModelSpec& m, int mb) {
  p.elementwise_efficiency = eff;
  ff::Job job{m, 1, mb, ff::Dtype::FP32};
  ff::Config c{ff::Grid{1, 1, 1, 1}, ff::Order{}, mb, ff::Recompute::None, ff::Overlap{}, ff::Dtype::FP32};
  return ff::predict(job, p, c).estimate.compute_s;
}

// Steps of 1 warm-up (10× slower, which the fit must ignore) and three at `t`.
ff::EngineStepSample steps(const ff::ModelSpec& m, int mb, double t) {
  return ff::EngineStepSample{m, mb, {10 * t, t, t, t}, {t / 4, t / 4, t / 4, t / 4}};
}

}  // namespace

TEST_CASE("the fit recovers the efficiency the steps were made with, over several micro-batches") {
  ff::MachineProfile p = fftest::toy_machine(2);
  ff::ModelSpec m = fftest::toy_model();
  for (double truth : {0.05, 0.3, 0.9}) {
    ff::ElementwiseFit f = ff::fit_elementwise(
        p, {steps(m, 1, model_compute(p, truth, m, 1)), steps(m, 4, model_compute(p, truth, m, 4))});
    REQUIRE(f.ok);
    CHECK_FALSE(f.clamped);
    CHECK(f.efficiency == rel(truth, 1e-9));
    CHECK(f.predicted_s == rel(f.measured_s, 1e-9));
  }
}

TEST_CASE("element-wise time is what the fit moves: 1/e scales it, GEMM time stays") {
  // Compute = A + B/e: from e = 1 to e = 1/2 it grows by B; to e = 1/4 by 3B.
  ff::MachineProfile p = fftest::toy_machine(2);
  ff::ModelSpec m = fftest::toy_model();
  double c1 = model_compute(p, 1, m, 2), c2 = model_compute(p, 0.5, m, 2), c4 = model_compute(p, 0.25, m, 2);
  CHECK(c4 - c1 == rel(3 * (c2 - c1), 1e-9));
  // Steps between the e = 1 and e = 1/2 predictions, at A + 1.5B, give e = 2/3.
  double b = c2 - c1, a = c1 - b;
  ff::ElementwiseFit f = ff::fit_elementwise(p, {steps(m, 2, a + 1.5 * b)});
  REQUIRE(f.ok);
  CHECK(f.efficiency == rel(2.0 / 3.0, 1e-9));
}

TEST_CASE("steps the model cannot explain: clamped at the bounds, or refused with the reason") {
  ff::MachineProfile p = fftest::toy_machine(2);
  ff::ModelSpec m = fftest::toy_model();
  double at1 = model_compute(p, 1, m, 1), b = model_compute(p, 0.5, m, 1) - at1, a = at1 - b;
  // Faster than efficiency 1 allows, but slower than GEMM alone: clamped at 1.
  ff::ElementwiseFit fast = ff::fit_elementwise(p, {steps(m, 1, a + 0.5 * b)});
  REQUIRE(fast.ok);
  CHECK(fast.clamped);
  CHECK(fast.efficiency == 1.0);
  // No slower than GEMM and attention alone: nothing left to element-wise work.
  ff::ElementwiseFit none = ff::fit_elementwise(p, {steps(m, 1, 0.9 * a)});
  CHECK_FALSE(none.ok);
  CHECK(fftest::contains(none.why, "nothing to element-wise work"));
  // Only the warm-up step: nothing to fit.
  ff::ElementwiseFit warm = ff::fit_elementwise(p, {ff::EngineStepSample{m, 1, {at1}, {at1 / 4}}});
  CHECK_FALSE(warm.ok);
}

TEST_CASE("engine steps in a measurement record: JSON both ways, errors naming the field") {
  ff::ModelSpec m = fftest::toy_model();
  ff::Measurement rec;
  rec.backend = "mpi";
  rec.ranks = 4;
  rec.gpus_per_node = 2;
  rec.nodes = 2;
  rec.engine_steps.push_back(ff::EngineStepSample{m, 2, {0.004, 0.002, 0.003}, {0.001, 0.001, 0.001}});
  nlohmann::json j = ff::to_json(rec);
  CHECK(j["engine_steps"][0]["compute_us"][0].get<double>() == rel(4000));
  CHECK(j["engine_steps"][0]["compute_us"][2].get<double>() == rel(3000));
  CHECK(j["engine_steps"][0]["model"]["hidden"] == 64);
  ff::Measurement back = ff::measurement_from_json(j, "rec.json");
  REQUIRE(back.engine_steps.size() == 1);
  CHECK(back.engine_steps[0].micro_batch == 2);
  CHECK(back.engine_steps[0].model.name == "toy");
  CHECK(back.engine_steps[0].compute_s[2] == rel(0.003));
  j["engine_steps"][0]["gemm_us"] = nlohmann::json{1000.0};
  std::string err;
  try {
    ff::measurement_from_json(j, "rec.json");
  } catch (const ff::InputError& e) {
    err = e.what();
  }
  CHECK(fftest::contains(err, "rec.json"));
  CHECK(fftest::contains(err, "engine_steps[0].gemm_us"));
}
