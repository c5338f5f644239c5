// Flash-attention rates (MODEL.md §2, "Attention"): the curve held against
// published measurements it was not fitted on. The reference is
// FlashAttention-2's forward+backward benchmark (batch × sequence = 16k
// tokens, hidden 2048; TFLOP/s of forward and backward FLOPs together, causal
// halved): Dao-AILab/flash-attention, assets/flash2_a100_fwd_bwd_benchmark.png
// and flash2_h100_fwd_bwd_benchmark.png (the FlashAttention-2 paper, Fig. 4),
// A100 80 GB SXM4 and H100 80 GB SXM5, bf16.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "advisor/calibration/calibrate.hpp"
#include "advisor/core/machine_profile.hpp"
#include "advisor/model/compute_model.hpp"
#include "tests/helpers.hpp"

namespace {

const std::vector<double> kSeq = {512, 1024, 2048, 4096, 8192, 16384};

struct Series {
  const char* gpu;
  double peak_tflops;
  int head_dim;
  bool causal;
  std::vector<double> tflops;  // at kSeq
};

const std::vector<Series> kFa2 = {
    {"A100", 312, 64, false, {132, 153, 162, 171, 175, 176}},
    {"A100", 312, 128, false, {150, 173, 187, 196, 201, 203}},
    {"A100", 312, 64, true, {88, 119, 140, 156, 165, 171}},
    {"A100", 312, 128, true, {99, 133, 155, 173, 182, 189}},
    {"H100", 989, 64, false, {215, 254, 274, 288, 294, 296}},
    {"H100", 989, 128, false, {248, 294, 320, 326, 335, 338}},
    {"H100", 989, 64, true, {141, 192, 232, 257, 273, 284}},
    {"H100", 989, 128, true, {163, 221, 265, 294, 308, 328}},
};

double rate(const ff::AttentionCurve& c, double peak, double s) {
  return c.efficiency_max * peak * s / (s + c.half_seq);
}

}  // namespace

TEST_CASE("attention rates: fitted on 512, 2k and 8k tokens, 1k, 4k and 16k priced within 10%") {
  double worst = 0;
  for (const Series& s : kFa2) {
    CAPTURE(s.gpu);
    CAPTURE(s.head_dim);
    CAPTURE(s.causal);
    std::vector<double> seq, flops;
    for (size_t i = 0; i < kSeq.size(); i += 2) seq.push_back(kSeq[i]), flops.push_back(s.tflops[i] * 1e12);
    const ff::AttentionCurve c = ff::fit_attention_curve(seq, flops, s.peak_tflops * 1e12, s.head_dim, s.causal);
    for (size_t i = 1; i < kSeq.size(); i += 2) {
      const double e = rate(c, s.peak_tflops * 1e12, kSeq[i]) / (s.tflops[i] * 1e12) - 1;
      CAPTURE(kSeq[i]);
      CHECK(std::abs(e) <= 0.10);
      worst = std::max(worst, std::abs(e));
    }
  }
  MESSAGE("worst held-out error " << worst * 100 << "%");
}

TEST_CASE("attention rates: the curve through exact points gives its parameters back") {
  // By hand: efficiency_max 0.6 of 1 PFLOP/s, half at 500 tokens: 600·S/(S+500) TF.
  std::vector<double> seq = {256, 1000, 4000}, flops;
  for (double s : seq) flops.push_back(600e12 * s / (s + 500));
  const ff::AttentionCurve c = ff::fit_attention_curve(seq, flops, 1e15, 128, true);
  CHECK(c.efficiency_max == doctest::Approx(0.6).epsilon(1e-9).scale(0));
  CHECK(c.half_seq == doctest::Approx(500).epsilon(1e-9).scale(0));
  CHECK(fftest::contains(fftest::input_error_of([] { ff::fit_attention_curve({1024}, {1e14}, 1e15, 64, true); }),
                         "at least 2 sequence lengths"));
  // Rates that fall with length fit no curve rising to a limit.
  CHECK(fftest::contains(
      fftest::input_error_of([] { ff::fit_attention_curve({512, 4096}, {2e14, 1e14}, 1e15, 64, true); }), "no curve"));
}

TEST_CASE("attention rates: the bundled profiles price causal flash attention from their curves") {
  // perlmutter carries the A100 curves: causal d128 at 2,048 tokens within 5%
  // of the published 155 TF/s; fp32 falls back to attention_efficiency.
  const ff::MachineProfile pm = ff::load_machine("perlmutter");
  REQUIRE(pm.flash_attention.size() == 4);
  const double eff = ff::flash_attention_efficiency(pm, ff::Dtype::BF16, 2048, 128);
  CHECK(eff * 312e12 == doctest::Approx(155e12).epsilon(0.05).scale(0));
  CHECK(ff::flash_attention_efficiency(pm, ff::Dtype::FP32, 2048, 128) == pm.attention_efficiency);
  // Between d64 and d128 (d = 96) the rate lies between theirs.
  const double e64 = ff::flash_attention_efficiency(pm, ff::Dtype::BF16, 4096, 64);
  const double e128 = ff::flash_attention_efficiency(pm, ff::Dtype::BF16, 4096, 128);
  const double e96 = ff::flash_attention_efficiency(pm, ff::Dtype::BF16, 4096, 96);
  CHECK(e96 > std::min(e64, e128));
  CHECK(e96 < std::max(e64, e128));
  // dgx-h100 the H100's: causal d128 at 4,096 tokens within 5% of 294 TF/s.
  const ff::MachineProfile h = ff::load_machine("dgx-h100");
  CHECK(ff::flash_attention_efficiency(h, ff::Dtype::BF16, 4096, 128) * 989e12 ==
        doctest::Approx(294e12).epsilon(0.05).scale(0));
  // The time: a TFLOP at that published rate, 1e12 / 294e12 s, within 5%.
  CHECK(ff::flash_attention_time(h, ff::Dtype::BF16, 1e12, 4096, 128) == doctest::Approx(1 / 294.0).epsilon(0.05).scale(0));
}
