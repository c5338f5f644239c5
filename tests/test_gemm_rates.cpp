// GEMM rates (MODEL.md §2, "Kernels"): t = 2mnk / (efficiency_max · peak) +
// fixed, held against published bf16 cuBLAS measurements it was not fitted
// on. A100 SXM (312 TFLOP/s): NVIDIA's "CUDA 11 features revealed" blog,
// Fig. 6 (square m = n = k, read off the plot, ±10 TFLOP/s; a size range
// with one rate is priced at its geometric middle); the maximum achievable
// matmul FLOPS table of stas00/ml-engineering (compute/accelerator/README.md,
// two versions: 1024×10240×5120 and 6912×16384×2048); AxoNN's SC'24 paper,
// §VI-B (32768³ on a Perlmutter A100). H100 SXM (989 TFLOP/s): the same
// ml-engineering table (2048×2048×13312 and 6144×17920×2816).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "advisor/calibration/calibrate.hpp"
#include "advisor/core/machine_profile.hpp"
#include "advisor/model/compute_model.hpp"
#include "tests/helpers.hpp"

namespace {

constexpr double kA100 = 312e12, kH100 = 989e12;

// Sorted by FLOPs, so alternate points alternate in size.
const std::vector<ff::GemmRatePoint> kA100Points = {
    {1024, 1024, 1024, 90e12, kA100},     {1402, 1402, 1402, 150e12, kA100},    {1916, 1916, 1916, 197.5e12, kA100},
    {3072, 3072, 3072, 245e12, kA100},    {1024, 10240, 5120, 271.2e12, kA100}, {5321, 5321, 5321, 270e12, kA100},
    {6912, 16384, 2048, 267.9e12, kA100}, {8192, 8192, 8192, 290e12, kA100},    {32768, 32768, 32768, 280e12, kA100},
};
const std::vector<ff::GemmRatePoint> kH100Points = {
    {2048, 2048, 13312, 794.5e12, kH100},
    {6144, 17920, 2816, 792.1e12, kH100},
};

double priced(const ff::GemmRate& r, const ff::GemmRatePoint& q) {
  const double flops = 2 * q.m * q.n * q.k;
  return flops / (flops / (r.efficiency_max * q.peak_flops) + r.fixed_s);
}

// efficiency_max alone, from one point, with the fixed part given.
double efficiency_with(const ff::GemmRatePoint& q, double fixed_s) {
  const double flops = 2 * q.m * q.n * q.k;
  return flops / q.peak_flops / (flops / q.flops_per_s - fixed_s);
}

}  // namespace

TEST_CASE("GEMM rates: the A100 fitted on alternate published points prices the others within 10%") {
  for (size_t first : {size_t(0), size_t(1)}) {
    std::vector<ff::GemmRatePoint> fit, held;
    for (size_t i = 0; i < kA100Points.size(); ++i) ((i % 2 == first) ? fit : held).push_back(kA100Points[i]);
    const ff::GemmRate r = ff::fit_gemm_rate(fit);
    CAPTURE(r.efficiency_max);
    CAPTURE(r.fixed_s);
    // The plot's best square rate (290 of 312) and the sweep maxima (87%)
    // bracket the limit; the fixed part is a launch and a last wave, µs.
    CHECK(r.efficiency_max > 0.85);
    CHECK(r.efficiency_max < 0.93);
    CHECK(r.fixed_s > 5e-6);
    CHECK(r.fixed_s < 40e-6);
    for (const auto& q : held) {
      CAPTURE(q.m);
      CAPTURE(q.n);
      CAPTURE(q.k);
      CHECK(std::abs(priced(r, q) / q.flops_per_s - 1) <= 0.10);
    }
  }
}

TEST_CASE("GEMM rates: the H100 from one published point and the A100's fixed work prices the other within 10%") {
  // The fixed part is a last wave's worth of work: the same work on a
  // GPU 989/312 times as fast takes that much less time.
  const ff::GemmRate a100 = ff::fit_gemm_rate(kA100Points);
  const double fixed = a100.fixed_s * kA100 / kH100;
  for (size_t i = 0; i < kH100Points.size(); ++i) {
    const ff::GemmRate h100{efficiency_with(kH100Points[i], fixed), fixed};
    const auto& other = kH100Points[1 - i];
    CHECK(std::abs(priced(h100, other) / other.flops_per_s - 1) <= 0.10);
  }
}

TEST_CASE("GEMM rates: a rate the fit is given back exactly, and bad input refused") {
  // Hand-made rates from efficiency 0.8 and 10 µs on a 100 TFLOP/s GPU.
  std::vector<ff::GemmRatePoint> pts;
  for (double n : {512.0, 2048.0, 8192.0}) {
    const double flops = 2 * n * n * n, t = flops / 80e12 + 10e-6;
    pts.push_back({n, n, n, flops / t, 100e12});
  }
  const ff::GemmRate r = ff::fit_gemm_rate(pts);
  CHECK(r.efficiency_max == doctest::Approx(0.8).epsilon(1e-9).scale(0));
  CHECK(r.fixed_s == doctest::Approx(10e-6).epsilon(1e-9).scale(0));
  CHECK_THROWS_WITH_AS(ff::fit_gemm_rate({pts[0]}), doctest::Contains("2 or more shapes"), ff::InputError);
  pts[1].flops_per_s = 0;
  CHECK_THROWS_WITH_AS(ff::fit_gemm_rate(pts), doctest::Contains("must be > 0"), ff::InputError);
}

TEST_CASE("GEMM rates: the bundled A100 and H100 profiles carry the fit of every published point") {
  const ff::GemmRate a100 = ff::fit_gemm_rate(kA100Points);
  const double fixed = a100.fixed_s * kA100 / kH100;
  double u = 0;  // H100: efficiency_max by least squares of relative error with the fixed part given
  for (const auto& q : kH100Points) u += 1 / efficiency_with(q, fixed);
  const double h100_eff = kH100Points.size() / u;
  for (const char* name : {"perlmutter"}) {
    const ff::MachineProfile p = ff::load_machine(name);
    CAPTURE(name);
    CHECK(p.gemm_rate.efficiency_max == doctest::Approx(a100.efficiency_max).epsilon(0.002).scale(0));
    CHECK(p.gemm_rate.fixed_s == doctest::Approx(a100.fixed_s).epsilon(0.01).scale(0));
  }
  for (const char* name : {"alps", "dgx-h100"}) {
    const ff::MachineProfile p = ff::load_machine(name);
    CAPTURE(name);
    CHECK(p.gemm_rate.efficiency_max == doctest::Approx(h100_eff).epsilon(0.01).scale(0));
    CHECK(p.gemm_rate.fixed_s == doctest::Approx(fixed).epsilon(0.01).scale(0));
  }
  // And the profile prices a GEMM as the form says: 8192³ on the A100.
  const ff::MachineProfile p = ff::load_machine("perlmutter");
  const double flops = 2.0 * 8192 * 8192 * 8192;
  CHECK(ff::gemm_time(p, ff::Dtype::BF16, 8192, 8192, 8192) ==
        doctest::Approx(flops / (p.gemm_rate.efficiency_max * kA100) + p.gemm_rate.fixed_s).scale(0));
}
