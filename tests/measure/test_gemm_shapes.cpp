// The GEMM shapes measure times for a model: those cost_model prices, worked
// out by hand from MODEL.md §1 (a normal layer k → n holds k/G_x × n/G_y, a
// transposed one k/G_y × n/G_x; forward (t, n_l, k_l) nn, input gradient
// (t, k_l, n_l) nt, weight gradient (k_l, n_l, t) tn).
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "measure/gemm.hpp"

TEST_CASE("model GEMM shapes: toy GPT (H 64, F 256, Vp 128, S 16) on G_x = 2, G_y = 1") {
  ff::ModelSpec toy{"toy", 2, 64, 4, 256, 100, 128, 16};
  auto shapes = ff::measure::model_gemm_shapes(toy, {{2, 1}}, 1);  // t = 1 · 16 tokens
  auto str = [](const ff::measure::GemmShape& s) {
    return std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k) + " " + s.layout;
  };
  std::vector<std::string> got;
  for (const auto& s : shapes) got.push_back(str(s));
  CHECK(got == std::vector<std::string>{
                   // QKV 64 → 192, normal: k_l = 64/2 = 32, n_l = 192/1 = 192.
                   "16x192x32 nn", "16x32x192 nt", "32x192x16 tn",
                   // attention-out 64 → 64, transposed: k_l = 64/1 = 64, n_l = 64/2 = 32.
                   "16x32x64 nn", "16x64x32 nt", "64x32x16 tn",
                   // FC1 64 → 256, normal: k_l = 32, n_l = 256.
                   "16x256x32 nn", "16x32x256 nt", "32x256x16 tn",
                   // FC2 256 → 64, transposed: k_l = 256, n_l = 32.
                   "16x32x256 nn", "16x256x32 nt", "256x32x16 tn",
                   // LM head 64 → 128, normal: k_l = 32, n_l = 128.
                   "16x128x32 nn", "16x32x128 nt", "32x128x16 tn"});
}

TEST_CASE("model GEMM shapes: a shape two grids share is timed once; micro-batch scales t") {
  ff::ModelSpec toy{"toy", 2, 64, 4, 256, 100, 128, 16};
  // G 1x1 and 1x1 again: the second adds nothing. 5 layers × 3 layouts = 15.
  CHECK(ff::measure::model_gemm_shapes(toy, {{1, 1}, {1, 1}}, 1).size() == 15);
  auto two = ff::measure::model_gemm_shapes(toy, {{1, 1}}, 2);  // t = 32
  CHECK(two.front().m == 32);
  CHECK(two.front().n == 192);
  CHECK(two.front().k == 64);
}

TEST_CASE("the default GEMM grid: every (m, n, k) of the dimensions") {
  auto shapes = ff::measure::grid_gemm_shapes({64, 256, 1024});
  CHECK(shapes.size() == 27);
  CHECK(shapes.front().m == 64);
  CHECK(shapes.back().k == 1024);
  // Enough calls for 2·10⁸ FLOP: 64³ is 524288 FLOP → 382 calls; 1024³ → 1.
  CHECK(ff::measure::gemm_calls(shapes.front(), 2e8) == 382);
  CHECK(ff::measure::gemm_calls(shapes.back(), 2e8) == 1);
}
