// Llama-style blocks (MODEL.md §12): grouped-query attention, SwiGLU,
// RMSNorm, RoPE, no biases, tied or untied embeddings, priced by hand on a
// small model and held against Llama 3's published parameter counts.
//
// Toy: L = 2, H = 64, A = 4 query heads and A_kv = 2 KV heads of d_h = 16,
// F = 96 (SwiGLU), V = 100 (Vp = 128), S = 16; micro-batch 1, t = 16 tokens.
#include <doctest/doctest.h>

#include <cstring>
#include <string>

#include "advisor/model/prediction.hpp"
#include "tests/helpers.hpp"
#include "tests/plan_terms.hpp"

using namespace ff;
using fftest::comm_term;
using fftest::compute_term;
using fftest::contains;
using fftest::rel;

namespace {

ModelSpec llama_toy(bool tied = false) {
  ModelSpec m{"llama-toy", 2, 64, 4, 96, 100, 128, 16};
  m.kv_heads = 2;
  m.head_dim = 16;
  m.mlp = Mlp::SwiGlu;
  m.norm = Norm::RmsNorm;
  m.positions = Positions::Rope;
  m.bias = m.qkv_bias = false;
  m.tied_embeddings = tied;
  return m;
}

}  // namespace

TEST_CASE("llama: Llama 3's published parameter counts") {
  // Per block: QKV H·(A + 2·A_kv)·d_h, out A·d_h·H, gate, up and down 3·H·F,
  // two RMSNorm weights 2H; embedding and untied head 2·V·H; final norm H.
  auto count = [](double L, double H, double A, double F) {
    const double V = 128256, Akv = 8, dh = 128;
    return L * (H * (A + 2 * Akv) * dh + A * dh * H + 3 * H * F + 2 * H) + 2 * V * H + H;
  };
  CHECK(parameter_count(load_model("llama3-8b")) == rel(count(32, 4096, 32, 14336)));
  CHECK(parameter_count(load_model("llama3-70b")) == rel(count(80, 8192, 64, 28672)));
  CHECK(parameter_count(load_model("llama3-405b")) == rel(count(126, 16384, 128, 53248)));
  // Meta's model cards: 8.03 B, 70.6 B, 405.9 B (to the digits published).
  CHECK(parameter_count(load_model("llama3-8b")) == doctest::Approx(8.03e9).epsilon(0.001));
  CHECK(parameter_count(load_model("llama3-70b")) == doctest::Approx(70.6e9).epsilon(0.001));
  CHECK(parameter_count(load_model("llama3-405b")) == doctest::Approx(405.9e9).epsilon(0.001));
}

TEST_CASE("llama: the block's layers, FLOPs and what the grid must divide") {
  const ModelSpec m = llama_toy();
  const auto layers = block_layers(m);
  CHECK(layers[0].n == (4 + 2 * 2) * 16);  // QKV: 4 query and 2 + 2 KV heads of 16
  CHECK(layers[1].k == 4 * 16);            // attention-out reads A·d_h
  CHECK(layers[2].n == 2 * 96);            // gate and up
  CHECK(layers[3].k == 96);
  // 6·B·S·(L·(matmul weights + 2·S·A·d_h) + H·V), B = 2.
  const double weights = 64.0 * 128 + 64 * 64 + 3 * 64 * 96;
  CHECK(model_flops(m, 2) == rel(6.0 * 2 * 16 * (2 * (weights + 2 * 16 * 64) + 64 * 100)));
  // Each Y rank holds whole KV heads: A_kv = 2 divides G_y = 2, not 4.
  CHECK(split_problem(Job{m, 2, 2}, Grid{1, 2, 1, 1}, 1).empty());
  CHECK(contains(split_problem(Job{m, 4, 4}, Grid{1, 4, 1, 1}, 1), "KV heads 2 are not divisible by G_y=4"));
  // The engine runs it on the grids that keep whole KV heads per Y rank, as
  // validate plans them.
  CHECK(engine_split_problem(m, Grid{1, 2, 1, 1}).empty());
  CHECK(contains(engine_split_problem(m, Grid{1, 4, 1, 1}), "KV heads 2 % G_y 4 != 0"));
}

TEST_CASE("llama: collectives and memory-bound kernels of one block, by hand") {
  // Grid X = 2, Y = 2, Z = 2 on 8 GPUs, batch 4: 2 micro-steps of t = 16.
  const ModelSpec m = llama_toy();
  MachineProfile p = fftest::toy_machine(8);
  p.launch_s = 0;
  Plan plan;
  make_plan(Job{m, 8, 4}, p, Grid{1, 2, 2, 1}, 1, Recompute::None, plan);
  REQUIRE(plan.micro_steps == 2);
  // QKV's gathered block: H × (A + 2A_kv)·d_h / G_y = 64 × 128/2.
  const CommTerm* ag = comm_term(plan, "qkv", "fwd weight all-gather", Axis::Z);
  REQUIRE(ag);
  CHECK(ag->elements == 64.0 * 128 / 2);
  // FC1 holds matching gate and up columns: 64 × 192/2.
  ag = comm_term(plan, "fc1", "fwd weight all-gather", Axis::Z);
  REQUIRE(ag);
  CHECK(ag->elements == 64.0 * 192 / 2);
  // Y's forward all-reduce of attention-out's output [t, H]: 16 × 64.
  const CommTerm* ar = comm_term(plan, "attn_out", "fwd output all-reduce", Axis::Y);
  REQUIRE(ar);
  CHECK(ar->elements == 16.0 * 64);
  // Element-wise at 5e11 B/s, bf16: SwiGLU reads gate and up, writes one
  // [t, F/G_y] = 16 × 48; backward reads three, writes two.
  const ComputeTerm* act = compute_term(plan, "swiglu", "fwd");
  REQUIRE(act);
  CHECK(act->seconds == rel(3.0 * 16 * 48 * 2 / 5e11));
  act = compute_term(plan, "swiglu", "bwd");
  REQUIRE(act);
  CHECK(act->seconds == rel(5.0 * 16 * 48 * 2 / 5e11));
  // RoPE rotates the rank's 2 query and 1 KV heads' q and k: 3 × 16 values a
  // token, read and written.
  const ComputeTerm* rope = compute_term(plan, "rope", "fwd rotate q, k");
  REQUIRE(rope);
  CHECK(rope->seconds == rel(2.0 * 16 * 3 * 16 * 2 / 5e11));
  // No biases, no positions: no bias kernels, the lookup alone (read the
  // rows, write [t, H]).
  CHECK(compute_term(plan, "biases", "fwd add") == nullptr);
  const ComputeTerm* lookup = compute_term(plan, "embedding", "fwd lookup");
  REQUIRE(lookup);
  CHECK(lookup->seconds == rel(2.0 * 16 * 64 * 2 / 5e11));
  // Replicated: two RMSNorm weights a block and the final norm, no biases:
  // (2 · 2 + 1) · 64.
  const CommTerm* rep = comm_term(plan, "replicated", "grad all-reduce (biases, norms, positions)", Axis::Z);
  REQUIRE(rep);
  CHECK(rep->elements == (2 * 2 + 1) * 64.0);
}

TEST_CASE("llama: RMSNorm's one statistic over X") {
  // X = 2: LayerNorm all-reduces two statistics a token forward (twice per
  // block) and 2t backward; RMSNorm one and t.
  const ModelSpec m = llama_toy();
  Plan plan;
  make_plan(Job{m, 2, 2}, fftest::toy_machine(2), Grid{2, 1, 1, 1}, 1, Recompute::None, plan);
  const CommTerm* fwd = comm_term(plan, "rmsnorm", "fwd sum-of-squares all-reduce", Axis::X);
  REQUIRE(fwd);
  CHECK(fwd->elements == 16);
  CHECK(fwd->count == 1 * 2 * 2);  // one statistic, two norms, two blocks
  const CommTerm* bwd = comm_term(plan, "rmsnorm", "bwd statistics all-reduce", Axis::X);
  REQUIRE(bwd);
  CHECK(bwd->elements == 16);
  ModelSpec gpt = m;
  gpt.norm = Norm::LayerNorm;
  make_plan(Job{gpt, 2, 2}, fftest::toy_machine(2), Grid{2, 1, 1, 1}, 1, Recompute::None, plan);
  fwd = comm_term(plan, "layernorm", "fwd sum + centred sum-of-squares all-reduces", Axis::X);
  REQUIRE(fwd);
  CHECK(fwd->count == 2 * 2 * 2);
}

TEST_CASE("llama: tied embeddings, one copy or one per end stage") {
  const MachineProfile p = fftest::toy_machine(8);
  // One stage, Z = 2: the head's reduce-scatter carries both gradients; the
  // embedding has none of its own, and its weight is stored once.
  Plan plan;
  make_plan(Job{llama_toy(true), 2, 2}, p, Grid{1, 1, 2, 1}, 1, Recompute::None, plan);
  CHECK(comm_term(plan, "embedding", "bwd weight-grad reduce-scatter", Axis::Z) == nullptr);
  CHECK(comm_term(plan, "lm_head", "bwd weight-grad reduce-scatter", Axis::Z) != nullptr);
  const double vh = 128.0 * 64;
  CHECK(local_params(llama_toy(false), Grid{}).sharded - local_params(llama_toy(true), Grid{}).sharded == vh);
  // Two stages: each end keeps a copy and they sum their gradients once a step.
  const Job job = Job{llama_toy(true), 2, 2};
  const Grid staged{1, 1, 1, 1, 2};
  make_plan(job, p, staged, 1, Recompute::None, plan, stage_of(job, staged, 0));
  const CommTerm* tie = comm_term(plan, "embedding", "tied weight-grad all-reduce (first and last stage)", Axis::P);
  REQUIRE(tie);
  CHECK(tie->elements == vh);
  CHECK(tie->per_step);
  make_plan(job, p, staged, 1, Recompute::None, plan, stage_of(job, staged, 1));
  CHECK(comm_term(plan, "lm_head", "tied weight-grad all-reduce (first and last stage)", Axis::P) != nullptr);
}

TEST_CASE("llama: recommend and predict run Llama 3 end to end") {
  Job job = Job{load_model("llama3-70b"), 1024, 1024};
  const MachineProfile p = load_machine("dgx-h100");
  Config c;
  c.grid = Grid{1, 8, 1, 128};
  c.recompute = Recompute::Full;
  c.shard_optimizer = true;
  const Prediction pr = predict(job, p, c);
  CHECK(pr.estimate.time_s > 0);
  // MFU on Llama 3 70B's FLOPs by hand: 6·B·S·(L·(weights + 2·S·A·d_h) + H·V),
  // weights H·(A + 2A_kv)·d_h + A·d_h·H + 3·H·F a block.
  const double H = 8192, S = 8192, weights = H * (64 + 16) * 128 + 64 * 128 * H + 3 * H * 28672;
  const double flops = 6.0 * 1024 * S * (80 * (weights + 2 * S * 64 * 128) + H * 128256);
  CHECK(pr.estimate.mfu == rel(flops / (pr.estimate.time_s * 1024 * 989e12), 1e-9));
}
