// The kernel inventory (MODEL.md §2, "Kernels"): launches and bytes of the
// memory-bound kernels at each fusion level, each launch priced, the host's
// issue rate as a floor, and compute slowed under hidden collectives; all
// counted by hand on the toy model.
//
// Model: L = 2, H = 64, A = 4, F = 256, Vp = 128, S = 16; one GPU, batch 2,
// micro-batch 1: 2 micro-steps of t = 16 tokens.
#include <doctest/doctest.h>

#include <cstring>
#include <string>

#include "advisor/model/kernel_inventory.hpp"
#include "advisor/model/prediction.hpp"
#include "tests/helpers.hpp"
#include "tests/plan_terms.hpp"

using namespace ff;
using fftest::rel;

namespace {

Job one_gpu_job(Fusion f) {
  Job j;
  j.model = fftest::toy_model();
  j.gpus = 1;
  j.batch = 2;
  j.fusion = f;
  return j;
}

}  // namespace

TEST_CASE("kernels: a block's memory-bound kernels at each fusion level, by hand") {
  // t = 8 tokens, hx = 4 (H = 64 over G_x = 16), fy = 16, output columns
  // 12 + 4 + 16 + 4 = 36, 2 bytes; every layer's output whole after its GEMM.
  const std::array<double, 4> n{12, 4, 16, 4};
  const std::array<bool, 4> whole{true, true, true, true};
  const ModelSpec gpt = fftest::toy_model();
  const BlockKernels u = block_kernels(Fusion::Unfused, gpt, 8, 4, 16, 16, 0, n, whole, 2);
  const BlockKernels f = block_kernels(Fusion::Fused, gpt, 8, 4, 16, 16, 0, n, whole, 2);
  const BlockKernels e = block_kernels(Fusion::Engine, gpt, 8, 4, 16, 16, 0, n, whole, 2);
  for (const BlockKernels* k : {&u, &f, &e}) {
    CHECK(k->norm_fwd.bytes == 2 * 8 * 4 * 2);  // read x, write y
    CHECK(k->norm_bwd.bytes == 3 * 8 * 4 * 2);  // read dy and x, write dx
    CHECK(k->norm_bwd.launches == 2);
    CHECK(k->residual_fwd.bytes == 3 * 8 * 4 * 2);
    CHECK(k->act_bwd.bytes == 3 * 8 * 16 * 2);
    CHECK(k->act_bwd.launches == 1);
  }
  for (const BlockKernels* k : {&u, &f}) {
    CHECK(k->act_fwd.bytes == 2 * 8 * 16 * 2);  // read the input, write the output
    CHECK(k->act_fwd.launches == 1);
  }
  CHECK(u.norm_fwd.launches == 1);
  CHECK(f.norm_fwd.launches == 1);
  CHECK(e.norm_fwd.launches == 3);  // sums, centred squares, normalise: split over X
  // The engine on whole rows (G_x = 1, hx = H = 64): nothing reduced between
  // the steps, one fused kernel forward; backward still 2 (dx with each
  // chunk's partial dγ, dβ, then the chunks added), as at G_x > 1 (the sums,
  // then dx with dγ, dβ). The other levels count the same on whole rows.
  const BlockKernels rows = block_kernels(Fusion::Engine, gpt, 8, 64, 1, 16, 0, n, whole, 2);
  CHECK(rows.norm_fwd.launches == 1);
  CHECK(rows.norm_bwd.launches == 2);
  CHECK(rows.norm_fwd.bytes == 3 * 8 * 64 * 2);  // also writes x̂, which its backward reads
  CHECK(block_kernels(Fusion::Fused, gpt, 8, 64, 1, 16, 0, n, whole, 2).norm_fwd.launches == 1);
  // Unfused: each bias added in its own pass (read, write) and summed (read).
  CHECK(u.bias_fwd.bytes == 2 * 8 * 36 * 2);
  CHECK(u.bias_bwd.bytes == 8 * 36 * 2);
  CHECK(u.bias_fwd.launches == 4);
  CHECK(u.bias_bwd.launches == 4);
  CHECK(f.bias_fwd.launches == 0);  // in the GEMM epilogues
  CHECK(f.bias_fwd.bytes == 0);
  // The engine: every bias in cuBLASLt's epilogue forward, and GELU in
  // FC1's, which writes GELU's output besides its input (no read of it,
  // no launch); backward the column sums' own kernels, each reading its
  // output gradient [t, n] once (8 tokens, 36 columns in all).
  CHECK(e.bias_fwd.launches == 0);
  CHECK(e.bias_fwd.bytes == 0);
  CHECK(e.bias_in_gemm == std::array<bool, 4>{true, true, true, true});
  CHECK(e.act_fwd.bytes == 8 * 16 * 2);
  CHECK(e.act_fwd.launches == 0);
  CHECK(e.bias_bwd.launches == 4);
  CHECK(e.bias_bwd.bytes == 8 * 36 * 2);
  // Split over X: QKV's and FC1's outputs are partial sums, reduced before
  // their biases, each then a kernel of its own, and GELU one after FC1's.
  const BlockKernels x = block_kernels(Fusion::Engine, gpt, 8, 4, 16, 16, 0, n, {false, true, false, true}, 2);
  CHECK(x.bias_fwd.launches == 2);
  CHECK(x.bias_in_gemm == std::array<bool, 4>{false, true, false, true});
  CHECK(x.act_fwd.bytes == 2 * 8 * 16 * 2);
  CHECK(x.act_fwd.launches == 1);
  // No bias on FC1: its GELU a kernel of its own, wherever the output is whole.
  const BlockKernels nb = block_kernels(Fusion::Engine, gpt, 8, 4, 16, 16, 0, {12, 4, 0, 4}, whole, 2);
  CHECK(nb.bias_fwd.launches == 0);
  CHECK(nb.act_fwd.launches == 1);
  CHECK(parse_fusion("engine") == Fusion::Engine);
  CHECK_FALSE(parse_fusion("megatron").has_value());
}

TEST_CASE("kernels: launches per iteration of the toy, by hand, at each level") {
  // Fused, per micro-step: a block forward 4 GEMMs + attention + 2 LayerNorms
  // + 2 residuals + GELU = 10, backward 8 GEMMs + attention + 2 × 2
  // LayerNorm + 2 residuals + GELU = 16; the embedding 3 + 2, the final
  // LayerNorm 1 + 2, the head's 3 GEMMs, the loss 2 + 1; no accumulation
  // pass without Z. Then the optimizer, once.
  const double fused = 2 * (2 * (10 + 16) + 5 + 3 + 3 + 3) + 1;
  // Engine, one GPU (G_x = 1: each LayerNorm's forward one fused kernel, its
  // backward 2 as fused's; no output reduced first, so the biases are in the
  // GEMMs' epilogues and GELU in FC1's): forward 4 GEMMs + attention + 2
  // LayerNorms + 2 residuals = 9; backward 4 bias kernels and flash
  // attention's backward as 3 (dO·O, dK and dV, dQ): 16 + 4 + 2 = 22; the
  // embedding 2 + 1, the final LayerNorm 1 + 2, the loss 2 + 1; the
  // optimizer as 4 (the norm's squares and their sum, AdamW on each arena).
  const double engine = 2 * (2 * (9 + 22) + 3 + 3 + 3 + 3) + 4;
  // Unfused: 4 bias kernels each way (block 14 + 20), the embedding 3 + 2,
  // the loss as eight ops forward and three backward.
  const double unfused = 2 * (2 * (14 + 20) + 5 + 3 + 3 + 11) + 1;
  const MachineProfile p = fftest::toy_machine(1);
  for (const auto& level : {std::pair{Fusion::Fused, fused}, {Fusion::Engine, engine}, {Fusion::Unfused, unfused}}) {
    Plan plan;
    make_plan(one_gpu_job(level.first), p, Grid{1, 1, 1, 1}, 1, Recompute::None, plan);
    const std::string name = fusion_name(level.first);
    const double want = level.second;
    INFO(name);
    CHECK(plan.launches == want);
  }
}

TEST_CASE("kernels: each launch is priced beside its bytes") {
  MachineProfile p = fftest::toy_machine(1);
  p.launch_s = 3e-6;  // element-wise at 1e12 × 0.5 B/s
  Plan plan;
  make_plan(one_gpu_job(Fusion::Unfused), p, Grid{1, 1, 1, 1}, 1, Recompute::None, plan);
  const ComputeTerm* ln = fftest::compute_term(plan, "layernorm", "fwd");
  REQUIRE(ln);
  CHECK(ln->seconds == rel(2.0 * 16 * 64 * 2 / 5e11 + 3e-6));
  CHECK(ln->cls == KernelClass::Norm);
  // The biases: columns 192 + 64 + 256 + 64 = 576 of 16 tokens.
  const ComputeTerm* bias = fftest::compute_term(plan, "biases", "fwd add");
  REQUIRE(bias);
  CHECK(bias->seconds == rel(2.0 * 16 * 576 * 2 / 5e11 + 4 * 3e-6));
  const ComputeTerm* bias_bwd = fftest::compute_term(plan, "biases", "bwd column sums");
  REQUIRE(bias_bwd);
  CHECK(bias_bwd->seconds == rel(16.0 * 576 * 2 / 5e11 + 4 * 3e-6));
  // GEMMs pay no launch of their own here: their rate includes it.
  const ComputeTerm* qkv = fftest::compute_term(plan, "qkv", "fwd GEMM");
  REQUIRE(qkv);
  CHECK(qkv->seconds == rel(2.0 * 16 * 192 * 64 / (100e12 * 0.5)));
  make_plan(one_gpu_job(Fusion::Fused), p, Grid{1, 1, 1, 1}, 1, Recompute::None, plan);
  CHECK(fftest::compute_term(plan, "biases", "fwd add") == nullptr);
}

TEST_CASE("kernels: a step is never shorter than the host takes to issue its launches") {
  // 1 ms a launch: every kernel's own work is nothing beside it, so a
  // micro-step's forward takes exactly its launches. Fused forward: 2 × 10
  // in the blocks, the embedding's 3, the final LayerNorm's 1, the head's
  // GEMM and the loss's 2 = 27; backward 2 × 16 + 2 + 2 + 2 + 1 = 39.
  MachineProfile p = fftest::toy_machine(1);
  p.launch_s = 1e-3;
  Plan plan;
  make_plan(one_gpu_job(Fusion::Fused), p, Grid{1, 1, 1, 1}, 1, Recompute::None, plan);
  CHECK(plan.compute_fwd_s == rel(27e-3, 1e-9));
  CHECK(plan.compute_bwd_s == rel(39e-3, 1e-9));
  const ComputeTerm* wait = fftest::compute_term(plan, "host", "fwd launch-bound wait");
  REQUIRE(wait);
  CHECK(wait->cls == KernelClass::LaunchBound);
  CHECK(wait->launches == 0);
  // Without a launch cost nothing waits for the host.
  make_plan(one_gpu_job(Fusion::Fused), fftest::toy_machine(1), Grid{1, 1, 1, 1}, 1, Recompute::None, plan);
  CHECK(fftest::compute_term(plan, "host", "fwd launch-bound wait") == nullptr);
}

TEST_CASE("kernels: compute slows by compute_slowdown of the time it hides, and no more") {
  // Z = 2 on one node, every window able to hide (efficiency 1): the
  // weights' all-gathers and reduce-scatters hide under the GEMMs.
  MachineProfile p = fftest::toy_machine(2);
  p.overlap_efficiency = 1;
  Job job = one_gpu_job(Fusion::Fused);
  job.gpus = 2;
  job.batch = 4;
  Plan plan;
  make_plan(job, p, Grid{1, 1, 2, 1}, 1, Recompute::None, plan);
  std::vector<double> times(2 * plan.comm.size()), hidden(plan.comm.size());
  term_times(plan, placement_links(p, plan.grid, Order{}), times.data());
  const Overlap all{true, true, true, false};
  const Estimate calm = combine(plan, times.data(), all, 4 * 16, hidden.data());
  double hidden_per_iteration = 0;
  for (size_t i = 0; i < plan.comm.size(); ++i) hidden_per_iteration += per_iteration(plan, plan.comm[i]) * hidden[i];
  REQUIRE(hidden_per_iteration > 0);
  CHECK(calm.contention_s == 0);
  plan.compute_slowdown = 0.25;
  const Estimate slowed = combine(plan, times.data(), all, 4 * 16);
  CHECK(slowed.contention_s == rel(0.25 * hidden_per_iteration, 1e-9));
  CHECK(slowed.compute_s == rel(calm.compute_s + 0.25 * hidden_per_iteration, 1e-9));
  CHECK(slowed.time_s == rel(calm.time_s + 0.25 * hidden_per_iteration, 1e-9));
  for (Axis a : kAxes) CHECK(slowed.exposed_comm_s[int(a)] == calm.exposed_comm_s[int(a)]);
  // Nothing hidden, nothing slowed: no overlap flags.
  const Estimate none = combine(plan, times.data(), Overlap{}, 4 * 16);
  CHECK(none.contention_s == 0);
}
