// The plan of one iteration (MODEL.md §1 collectives table, "Beyond the linear
// layers", §2 compute, overlap and FLOP/s), on a toy model small enough that
// every buffer can be worked out by hand.
//
// Model: L = 2, H = 64, A = 4, F = 256, V = 100, Vp = 128, S = 16.
// Grid:  G_x = 4, G_y = 2, G_z = 2, G_d = 2 (32 ranks); B = 8, micro_batch 1,
//        so t = 1·16 = 16 tokens and B/(mb·G_z·G_d) = 8/4 = 2 micro-steps.
// X ≠ Y so that normal and transposed layers cannot be confused.
#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <vector>

#include "advisor/model/prediction.hpp"
#include "tests/helpers.hpp"

using namespace ff;
using fftest::rel;

namespace {

constexpr double L = 2, H = 64, F = 256, V = 100, Vp = 128, S = 16;
constexpr double t = 1 * S;  // micro_batch 1
constexpr double Gx = 4, Gy = 2, Gz = 2;

Job toy_job(long long batch = 8, Dtype dt = Dtype::BF16) {
  Job j;
  j.model = fftest::toy_model();
  j.gpus = 32;
  j.batch = batch;
  j.dtype = dt;
  return j;
}

const Grid kGrid{4, 2, 2, 2};

std::vector<const CommTerm*> find_all(const Plan& plan, const char* layer, const char* what) {
  std::vector<const CommTerm*> out;
  for (const auto& c : plan.comm)
    if (std::strcmp(c.layer, layer) == 0 && std::strcmp(c.what, what) == 0) out.push_back(&c);
  return out;
}

// The one term (layer, what); fails the test when there is not exactly one.
const CommTerm& term(const Plan& plan, const char* layer, const char* what) {
  auto all = find_all(plan, layer, what);
  INFO(layer, " / ", what);
  REQUIRE(all.size() == 1);
  return *all[0];
}

const CommTerm& term_on(const Plan& plan, const char* layer, const char* what, Axis a) {
  const CommTerm* hit = nullptr;
  for (const CommTerm* c : find_all(plan, layer, what))
    if (c->axis == a) hit = c;
  INFO(layer, " / ", what, " on ", axis_name(a));
  REQUIRE(hit != nullptr);
  return *hit;
}

const ComputeTerm& work(const Plan& plan, const char* layer, const char* what) {
  for (const auto& c : plan.compute)
    if (std::strcmp(c.layer, layer) == 0 && std::strcmp(c.what, what) == 0) return c;
  INFO(layer, " / ", what);
  FAIL("no such compute term");
  return plan.compute.front();
}

void check_term(const CommTerm& c, Axis axis, Coll coll, double elements, int elem_bytes, double count,
                bool per_step) {
  INFO(c.layer, " / ", c.what);
  CHECK(axis_name(c.axis) == std::string(axis_name(axis)));
  CHECK(coll_name(c.coll) == std::string(coll_name(coll)));
  CHECK(c.elements == elements);
  CHECK(c.elem_bytes == elem_bytes);
  CHECK(c.count == count);
  CHECK(c.per_step == per_step);
}

// One linear layer k → n (MODEL.md §1 table). Normal: output partial sums over
// X of t·n/G_y, input-gradient over Y of t·k/G_x; transposed swaps X and Y.
void check_linear(const Plan& plan, const char* name, double k, double n, bool transposed, bool rc) {
  const double fwd = L * (1 + rc);       // forward runs twice under full recompute
  const double block = k * n / (Gx * Gy);  // gathered k·n/(G_x·G_y)
  const double shard = block / Gz;         // all divisible by G_z = 2 here
  check_term(term(plan, name, "fwd weight all-gather"), Axis::Z, Coll::AllGather, block, 2, fwd, false);
  check_term(term(plan, name, "bwd weight all-gather"), Axis::Z, Coll::AllGather, block, 2, L, false);
  check_term(term(plan, name, "bwd weight-grad reduce-scatter"), Axis::Z, Coll::ReduceScatter, block, 2, L, false);
  if (!transposed) {
    check_term(term(plan, name, "fwd output all-reduce"), Axis::X, Coll::AllReduce, t * n / Gy, 2, fwd, false);
    check_term(term(plan, name, "bwd input-grad all-reduce"), Axis::Y, Coll::AllReduce, t * k / Gx, 2, L, false);
  } else {
    check_term(term(plan, name, "fwd output all-reduce"), Axis::Y, Coll::AllReduce, t * n / Gx, 2, fwd, false);
    check_term(term(plan, name, "bwd input-grad all-reduce"), Axis::X, Coll::AllReduce, t * k / Gy, 2, L, false);
  }
  // per step, from the fp32 shard accumulator
  check_term(term(plan, name, "weight-grad all-reduce"), Axis::D, Coll::AllReduce, shard, 4, L, true);
}

}  // namespace

TEST_CASE("cost: micro-steps and tokens") {
  Plan plan;
  make_plan(toy_job(), fftest::toy_machine(4), kGrid, 1, Recompute::None, plan);
  CHECK(plan.micro_steps == 8 / (1 * 2 * 2));
  CHECK(plan.tokens == 16);
  make_plan(toy_job(32), fftest::toy_machine(4), kGrid, 2, Recompute::None, plan);
  CHECK(plan.micro_steps == 32 / (2 * 2 * 2));
  CHECK(plan.tokens == 2 * 16);
  make_plan(toy_job(32), fftest::toy_machine(4), Grid{1, 1, 4, 2}, 4, Recompute::None, plan);
  CHECK(plan.micro_steps == 32 / (4 * 4 * 2));
}

TEST_CASE("cost: collectives of one block, normal vs transposed layers") {
  const MachineProfile p = fftest::toy_machine(4);
  for (bool rc : {false, true}) {
    CAPTURE(rc);
    Plan plan;
    make_plan(toy_job(), p, kGrid, 1, rc ? Recompute::Full : Recompute::None, plan);
    // QKV H → 3H normal: fwd all-reduce over X of t·3H/G_y = 16·192/2 = 1536;
    // bwd over Y of t·H/G_x = 16·64/4 = 256; block 64·192/8 = 1536.
    check_linear(plan, "qkv", H, 3 * H, false, rc);
    CHECK(term(plan, "qkv", "fwd output all-reduce").elements == 1536);
    CHECK(term(plan, "qkv", "bwd input-grad all-reduce").elements == 256);
    // attention-out H → H transposed: fwd over Y of t·H/G_x = 256; bwd over X
    // of t·H/G_y = 512; block 64·64/8 = 512.
    check_linear(plan, "attn_out", H, H, true, rc);
    CHECK(term(plan, "attn_out", "fwd output all-reduce").elements == 256);
    CHECK(term(plan, "attn_out", "bwd input-grad all-reduce").elements == 512);
    // FC1 H → F normal: fwd over X of t·F/G_y = 2048; bwd over Y of t·H/G_x = 256.
    check_linear(plan, "fc1", H, F, false, rc);
    // FC2 F → H transposed: fwd over Y of t·H/G_x = 256; bwd over X of t·F/G_y = 2048.
    check_linear(plan, "fc2", F, H, true, rc);
    CHECK(term(plan, "fc2", "bwd input-grad all-reduce").elements == 2048);
    CHECK(term(plan, "fc2", "weight-grad all-reduce").elements == 1024);  // 256·64/8/2

    // Z all-gathers per layer per micro-step: 2, plus 1 with full recompute.
    double gathers = term(plan, "fc1", "fwd weight all-gather").count + term(plan, "fc1", "bwd weight all-gather").count;
    CHECK(gathers == L * (rc ? 3 : 2));
  }
}

TEST_CASE("cost: LayerNorm, embedding, LM head, cross-entropy, replicated parameters") {
  const MachineProfile p = fftest::toy_machine(4);
  for (bool rc : {false, true}) {
    CAPTURE(rc);
    Plan plan;
    make_plan(toy_job(), p, kGrid, 1, rc ? Recompute::Full : Recompute::None, plan);
    // Statistics are reduced in fp32 (4 bytes).
    // Two LayerNorms a block, each 2 forward all-reduces of t over X (×2 under recompute),
    // 1 backward of 2t.
    check_term(term(plan, "layernorm", "fwd sum + centred sum-of-squares all-reduces"), Axis::X, Coll::AllReduce, t,
               4, 2 * 2 * L * (rc ? 2 : 1), false);
    check_term(term(plan, "layernorm", "bwd statistics all-reduce"), Axis::X, Coll::AllReduce, 2 * t, 4, 2 * L, false);
    // The final LayerNorm, once; the head is not recomputed.
    check_term(term(plan, "final_layernorm", "fwd sum + centred sum-of-squares all-reduces"), Axis::X, Coll::AllReduce,
               t, 4, 2, false);
    check_term(term(plan, "final_layernorm", "bwd statistics all-reduce"), Axis::X, Coll::AllReduce, 2 * t, 4, 1, false);

    // Embedding: Vp/G_y × H/G_x = 64 × 16 = 1024 a cell, 512 a Z shard.
    const double emb_block = Vp * H / (Gx * Gy);
    check_term(term(plan, "embedding", "fwd weight all-gather"), Axis::Z, Coll::AllGather, emb_block, 2, 1, false);
    check_term(term(plan, "embedding", "fwd lookup all-reduce"), Axis::Y, Coll::AllReduce, t * H / Gx, 2, 1, false);
    check_term(term(plan, "embedding", "bwd weight-grad reduce-scatter"), Axis::Z, Coll::ReduceScatter, emb_block, 2, 1,
               false);
    check_term(term(plan, "embedding", "weight-grad all-reduce"), Axis::D, Coll::AllReduce, emb_block / Gz, 4, 1, true);

    // LM head: a normal layer H → Vp, fwd all-reduce over X of t·Vp/G_y = 16·64 = 1024.
    const double head_block = H * Vp / (Gx * Gy);
    check_term(term(plan, "lm_head", "fwd output all-reduce"), Axis::X, Coll::AllReduce, t * Vp / Gy, 2, 1, false);
    CHECK(term(plan, "lm_head", "fwd output all-reduce").elements == 1024);
    check_term(term(plan, "lm_head", "bwd input-grad all-reduce"), Axis::Y, Coll::AllReduce, t * H / Gx, 2, 1, false);
    check_term(term(plan, "lm_head", "fwd weight all-gather"), Axis::Z, Coll::AllGather, head_block, 2, 1, false);
    check_term(term(plan, "lm_head", "bwd weight all-gather"), Axis::Z, Coll::AllGather, head_block, 2, 1, false);
    check_term(term(plan, "lm_head", "bwd weight-grad reduce-scatter"), Axis::Z, Coll::ReduceScatter, head_block, 2, 1,
               false);
    check_term(term(plan, "lm_head", "weight-grad all-reduce"), Axis::D, Coll::AllReduce, head_block / Gz, 4, 1, true);

    // Cross-entropy over Y: MAX of t, then SUM of 2t; nothing in backward.
    check_term(term(plan, "cross_entropy", "fwd max all-reduce"), Axis::Y, Coll::AllReduce, t, 4, 1, false);
    check_term(term(plan, "cross_entropy", "fwd sum-exp + target-logit all-reduce"), Axis::Y, Coll::AllReduce, 2 * t, 4,
               1, false);

    // Replicated parameters, per step over Z and over D, fp32 gradients.
    // Per block on [·, H/G_x] = 16: two LayerNorms' γ, β 4·16, attention-out
    // and FC2 biases 16 each; on the Y split: QKV bias 3H/G_y = 96, FC1 bias
    // F/G_y = 128. Then the final LayerNorm 2·16 and positions S·H/G_x = 256.
    const double replicated = L * (4 * 16 + 96 + 16 + 128 + 16) + 2 * 16 + 16 * 16;  // = 928
    CHECK(replicated == 928);
    const char* rep = "grad all-reduce (biases, norms, positions)";
    CHECK(find_all(plan, "replicated", rep).size() == 2);
    check_term(term_on(plan, "replicated", rep, Axis::Z), Axis::Z, Coll::AllReduce, replicated, 4, 1, true);
    check_term(term_on(plan, "replicated", rep, Axis::D), Axis::D, Coll::AllReduce, replicated, 4, 1, true);

    // Nothing else: 4 layers × 6 terms, LayerNorm 2, embedding 4, final
    // LayerNorm 2, LM head 6, cross-entropy 2, replicated 2.
    CHECK(plan.comm.size() == 4 * 6 + 2 + 4 + 2 + 6 + 2 + 2);
  }
}

TEST_CASE("cost: fp32 means 4-byte collectives") {
  Plan plan;
  make_plan(toy_job(8, Dtype::FP32), fftest::toy_machine(4), kGrid, 1, Recompute::None, plan);
  CHECK(plan.dtype == Dtype::FP32);
  check_term(term(plan, "qkv", "fwd output all-reduce"), Axis::X, Coll::AllReduce, t * 3 * H / Gy, 4, L, false);
  check_term(term(plan, "fc1", "fwd weight all-gather"), Axis::Z, Coll::AllGather, H * F / (Gx * Gy), 4, L, false);
  CHECK(term(plan, "lm_head", "fwd output all-reduce").bytes() == t * Vp / Gy * 4);
  CHECK(plan.peak_flops_all == rel(32 * 25e12));  // toy_machine's fp32 peak
}

TEST_CASE("cost: a size-1 axis produces no term") {
  const MachineProfile p = fftest::toy_machine(4);
  Plan plan;
  make_plan(toy_job(), p, Grid{4, 2, 2, 1}, 1, Recompute::None, plan);
  for (const auto& c : plan.comm) CHECK(c.axis != Axis::D);
  // Without D: the 4 + 2 per-step shard all-reduces and the replicated one over D go.
  CHECK(plan.comm.size() == 42 - 4 - 2 - 1);
  make_plan(toy_job(), p, Grid{1, 2, 2, 2}, 1, Recompute::None, plan);
  for (const auto& c : plan.comm) CHECK(c.axis != Axis::X);
  make_plan(toy_job(), p, Grid{4, 1, 2, 2}, 1, Recompute::None, plan);
  for (const auto& c : plan.comm) CHECK(c.axis != Axis::Y);
  make_plan(toy_job(), p, Grid{4, 2, 1, 2}, 1, Recompute::None, plan);
  for (const auto& c : plan.comm) CHECK(c.axis != Axis::Z);
  make_plan(toy_job(), p, Grid{1, 1, 1, 1}, 1, Recompute::None, plan);
  CHECK(plan.comm.empty());
}

TEST_CASE("cost: GEMM and attention compute from the profile") {
  // toy_machine: every GEMM at efficiency 0.5 of 100 TFLOP/s; attention at 0.25.
  const MachineProfile p = fftest::toy_machine(4);
  const double peak = 100e12;
  Plan plan;
  make_plan(toy_job(), p, kGrid, 1, Recompute::None, plan);
  // QKV on a rank: [t, H/G_x] × [H/G_x, 3H/G_y] = 16×16 by 16×96.
  CHECK(work(plan, "qkv", "fwd GEMM").seconds == rel(2.0 * 16 * 96 * 16 / (peak * 0.5)));
  CHECK(work(plan, "qkv", "fwd GEMM").count == L);
  // FC2 (transposed) on a rank: [t, F/G_y] × [F/G_y, H/G_x] = 16×128 by 128×16.
  CHECK(work(plan, "fc2", "fwd GEMM").seconds == rel(2.0 * 16 * 16 * 128 / (peak * 0.5)));
  // Backward GEMMs = 2× forward.
  for (const char* l : {"qkv", "attn_out", "fc1", "fc2"}) {
    CAPTURE(l);
    double fwd = work(plan, l, "fwd GEMM").seconds;
    double bwd = work(plan, l, "bwd input-grad GEMM").seconds + work(plan, l, "bwd weight-grad GEMM").seconds;
    CHECK(bwd == rel(2 * fwd));
  }
  // Attention: whole heads per Y rank for whole sequences, replicated over X.
  // Forward QKᵀ and AV are 2·2·S²·(H/G_y) FLOPs a sequence non-causal, half of
  // that causal: 2·mb·S²·H/G_y. Backward ≈ 2.5× forward.
  const double attn = 2.0 * 1 * S * S * (H / Gy) / (peak * 0.25);
  CHECK(work(plan, "attention", "fwd (flash, causal)").seconds == rel(attn));
  CHECK(work(plan, "attention", "bwd").seconds == rel(2.5 * attn));
  Plan other;
  make_plan(toy_job(), p, Grid{1, 2, 2, 2}, 1, Recompute::None, other);  // G_x does not split attention
  CHECK(work(other, "attention", "fwd (flash, causal)").seconds == rel(attn));
  make_plan(toy_job(), p, Grid{4, 1, 2, 2}, 1, Recompute::None, other);  // G_y does
  CHECK(work(other, "attention", "fwd (flash, causal)").seconds == rel(2 * attn));
  // Under recompute every block forward runs twice.
  make_plan(toy_job(), p, kGrid, 1, Recompute::Full, other);
  CHECK(work(other, "qkv", "fwd GEMM").count == 2 * L);
  CHECK(work(other, "attention", "fwd (flash, causal)").count == 2 * L);
  CHECK(work(other, "attention", "bwd").count == L);
}

TEST_CASE("cost: model FLOPs and MFU") {
  Plan plan;
  const MachineProfile p = fftest::toy_machine(32);
  make_plan(toy_job(), p, kGrid, 1, Recompute::None, plan);
  const double B = 8;
  // Narayanan et al., F = 4H: 72·B·S·L·H²·(1 + S/(6H) + V/(12·L·H)).
  const double flops = 72 * B * S * L * H * H * (1 + S / (6 * H) + V / (12 * L * H));
  CHECK(plan.model_flops == rel(flops));
  CHECK(plan.hardware_flops == rel(flops));
  CHECK(plan.peak_flops_all == rel(32 * 100e12));
  // HFU adds the recomputed block forward, a third of the block part:
  // 24·B·S·L·H²·(1 + S/(6H)).
  make_plan(toy_job(), p, kGrid, 1, Recompute::Full, plan);
  CHECK(plan.hardware_flops == rel(flops + 24 * B * S * L * H * H * (1 + S / (6 * H))));

  auto links = placement_links(p, kGrid, Order{});
  std::vector<double> times(2 * plan.comm.size());
  term_times(plan, links, times.data());
  Estimate e = combine(plan, times.data(), Overlap{}, B * S);
  CHECK(e.mfu == rel(flops / (e.time_s * 32 * 100e12)));
  CHECK(e.hfu == rel((flops + 24 * B * S * L * H * H * (1 + S / (6 * H))) / (e.time_s * 32 * 100e12)));
  CHECK(e.tokens_per_s == rel(B * S / e.time_s));
}

// Combine: one node of 32 GPUs, so every axis uses intra_default (5 µs, 100 GB/s).
TEST_CASE("cost: combine and overlap") {
  MachineProfile p = fftest::toy_machine(32);
  const double a = 5e-6, bw = 100e9;
  const Job job = toy_job();
  const double steps = 2;  // micro-steps
  const Overlap all{true, true, true};

  // The Y axis by hand (G_y = 2: an all-reduce costs 2α + bytes/busbw): per
  // micro-step ten bf16 all-reduces of t·H/G_x = 256 elements (attention-out
  // and FC2 forward, QKV and FC1 input-grad, 2 layers each; the embedding
  // lookup; the LM head input-grad) and cross-entropy's 16 and 32 fp32.
  const double y_ar = a * 2 + 512 / bw;
  const double comm_y = steps * (10 * y_ar + (a * 2 + 64 / bw) + (a * 2 + 128 / bw));
  // The D axis by hand, once a step: fp32 shards 768, 256, 1024, 1024 per
  // layer, embedding 512, LM head 512, replicated 928.
  const double comm_d = 11 * 2 * a + 4 * (2 * (768 + 256 + 1024 + 1024) + 512 + 512 + 928) / bw;

  auto priced = [&](const MachineProfile& prof, bool rc, Plan& plan, std::vector<double>& times) {
    make_plan(job, prof, kGrid, 1, rc ? Recompute::Full : Recompute::None, plan);
    times.resize(2 * plan.comm.size());
    term_times(plan, placement_links(prof, kGrid, Order{}), times.data());
  };
  // Σ comm by hand from each term's buffer: reps × α-β.
  auto hand_total_comm = [&](const Plan& plan) {
    double sum = 0;
    for (const auto& c : plan.comm) {
      int g = kGrid.size(c.axis);
      double one = c.coll == Coll::AllReduce ? fftest::hand_all_reduce(g, c.bytes(), a, bw)
                                             : fftest::hand_gather_scatter(g, c.bytes(), a, bw);
      sum += c.count * (c.per_step ? 1 : steps) * one;
    }
    // The loss and gradient-norm scalars over all 32 ranks, one node: two
    // 8-byte all-reduces, 2·(2·31·5 µs + 62/32 · 8 B / 100 GB/s) = 620.0003 µs.
    return sum + 2 * fftest::hand_all_reduce(int(kGrid.total()), 8, a, bw);
  };

  Plan plan;
  std::vector<double> times;

  SUBCASE("overlap efficiency 0: nothing is hidden, whatever the flags") {
    p.overlap_efficiency = 0;
    for (bool rc : {false, true}) {
      priced(p, rc, plan, times);
      Estimate e = combine(plan, times.data(), all, 8 * S);
      CHECK(e.time_s == rel(plan.compute_s + hand_total_comm(plan)));
      for (int i = 0; i < kAxisCount; ++i) CHECK(e.exposed_comm_s[i] == e.comm_s[i]);
      if (!rc) {
        CHECK(e.comm_s[int(Axis::Y)] == rel(comm_y));
        CHECK(e.comm_s[int(Axis::D)] == rel(comm_d));
      }
    }
  }
  SUBCASE("flags off: nothing is hidden, whatever the efficiency") {
    p.overlap_efficiency = 1;
    priced(p, false, plan, times);
    Estimate e = combine(plan, times.data(), Overlap{}, 8 * S);
    CHECK(e.time_s == rel(plan.compute_s + hand_total_comm(plan)));
    CHECK(e.exposed_comm_s[int(Axis::Y)] == rel(comm_y));
    CHECK(e.exposed_comm_s[int(Axis::D)] == rel(comm_d));
  }
  SUBCASE("OAR with a large window: the block input-grad all-reduces leave the exposed time") {
    p.overlap_efficiency = 1;
    p.peak_flops_bf16 = 1e8;  // GEMMs take ~0.1 s, collectives ~10 µs
    priced(p, false, plan, times);
    Estimate e = combine(plan, times.data(), Overlap{true, false, false}, 8 * S);
    // Y: QKV and FC1 input-grads, t·H/G_x = 256 bf16, 2 layers each, per micro-step.
    CHECK(e.comm_s[int(Axis::Y)] == rel(comm_y));
    CHECK(e.exposed_comm_s[int(Axis::Y)] == rel(comm_y - steps * (2 + 2) * y_ar));
    // X (G_x = 4: 6α + 1.5·bytes/busbw): attention-out t·H/G_y = 512 and FC2
    // t·F/G_y = 2048 bf16, 2 layers each.
    const double x_hidden = steps * 2 * ((6 * a + 1.5 * 1024 / bw) + (6 * a + 1.5 * 4096 / bw));
    CHECK(e.exposed_comm_s[int(Axis::X)] == rel(e.comm_s[int(Axis::X)] - x_hidden));
    // Z and D untouched.
    CHECK(e.exposed_comm_s[int(Axis::Z)] == rel(e.comm_s[int(Axis::Z)]));
    CHECK(e.exposed_comm_s[int(Axis::D)] == rel(comm_d));
    CHECK(e.time_s == rel(plan.compute_s + hand_total_comm(plan) - steps * (2 + 2) * y_ar - x_hidden));
  }
  SUBCASE("ORS + OAG with a large window: the block's Z gathers and reduce-scatters are hidden") {
    p.overlap_efficiency = 1;
    p.peak_flops_bf16 = 1e8;
    priced(p, false, plan, times);
    Estimate e = combine(plan, times.data(), Overlap{false, true, true}, 8 * S);
    // What stays exposed on Z (G_z = 2: AG/RS α + bytes/2/busbw, AR 2α + bytes/busbw):
    // embedding AG and RS of 1024 bf16, LM head 2 AGs and 1 RS of 1024 bf16 per
    // micro-step; replicated 928 fp32 once a step.
    const double zc = a + 0.5 * 2048 / bw;
    const double z_exposed = steps * 5 * zc + (2 * a + 928 * 4 / bw);
    CHECK(e.exposed_comm_s[int(Axis::Z)] == rel(z_exposed));
    CHECK(e.exposed_comm_s[int(Axis::Y)] == rel(comm_y));
  }
  SUBCASE("a slower non-blocking path: OAR's all-reduces cost 1.5× when nothing hides them") {
    p.overlap_efficiency = 0;
    p.nonblocking_slowdown = 1.5;
    priced(p, false, plan, times);
    Estimate e = combine(plan, times.data(), Overlap{true, false, false}, 8 * S);
    // Y: the QKV and FC1 input-grad all-reduces (2 layers, per micro-step) are
    // issued non-blocking and take half as long again; nothing else changes.
    CHECK(e.exposed_comm_s[int(Axis::Y)] == rel(comm_y + 0.5 * steps * (2 + 2) * y_ar));
    const double x_oar = steps * 2 * ((6 * a + 1.5 * 1024 / bw) + (6 * a + 1.5 * 4096 / bw));
    Estimate blocking = combine(plan, times.data(), Overlap{}, 8 * S);
    CHECK(e.exposed_comm_s[int(Axis::X)] == rel(blocking.exposed_comm_s[int(Axis::X)] + 0.5 * x_oar));
    CHECK(e.exposed_comm_s[int(Axis::D)] == rel(comm_d));
    // Without the flag the slowdown does not apply.
    CHECK(blocking.exposed_comm_s[int(Axis::Y)] == rel(comm_y));
  }
  SUBCASE("measured non-blocking figures: OAR's all-reduces priced at them, the rest at the blocking ones") {
    // The node's link measured with a non-blocking all-reduce of α 20 µs and
    // 25 GB/s (blocking: 5 µs, 100 GB/s); every axis here is inside it.
    p.overlap_efficiency = 0;
    const int ar = int(Coll::AllReduce);
    p.intra_default.nb_by_op[ar] = true;
    p.intra_default.nb_alpha_s[ar] = 20e-6;
    p.intra_default.nb_busbw[ar] = 25e9;
    priced(p, false, plan, times);
    Estimate e = combine(plan, times.data(), Overlap{true, false, false}, 8 * S);
    // Y (G_y = 2): QKV and FC1 input-grads, 256 bf16 = 512 bytes, 2 layers each, per micro-step.
    const double y_nb = 20e-6 * 2 + 512 / 25e9;
    CHECK(e.exposed_comm_s[int(Axis::Y)] == rel(comm_y - steps * 4 * y_ar + steps * 4 * y_nb));
    // X (G_x = 4): attention-out 1024 bytes and FC2 4096 bytes input-grads, 2 layers each.
    const double x_blocking = steps * 2 * ((6 * a + 1.5 * 1024 / bw) + (6 * a + 1.5 * 4096 / bw));
    const double x_nb = steps * 2 * ((6 * 20e-6 + 1.5 * 1024 / 25e9) + (6 * 20e-6 + 1.5 * 4096 / 25e9));
    Estimate blocking = combine(plan, times.data(), Overlap{}, 8 * S);
    CHECK(e.exposed_comm_s[int(Axis::X)] == rel(blocking.exposed_comm_s[int(Axis::X)] - x_blocking + x_nb));
    // The data axis' all-reduces are no OAR's: blocking figures, flag or not.
    CHECK(e.exposed_comm_s[int(Axis::D)] == rel(comm_d));
    CHECK(blocking.exposed_comm_s[int(Axis::Y)] == rel(comm_y));
    // The slowdown multiplies the measured non-blocking figure.
    plan.nonblocking_slowdown = 2;
    Estimate slow = combine(plan, times.data(), Overlap{true, false, false}, 8 * S);
    CHECK(slow.exposed_comm_s[int(Axis::Y)] == rel(comm_y - steps * 4 * y_ar + 2 * steps * 4 * y_nb));
    // What one call costs as issued: non-blocking under the flag only.
    size_t qkv_y = 0;
    while (!(plan.comm[qkv_y].hide == Hide::Oar && plan.comm[qkv_y].axis == Axis::Y)) ++qkv_y;
    CHECK(issued_nonblocking(plan.comm[qkv_y].hide, Overlap{true, false, false}));
    CHECK_FALSE(issued_nonblocking(plan.comm[qkv_y].hide, Overlap{false, true, true}));
    CHECK(issued_seconds(plan, times.data(), Overlap{true, false, false}, qkv_y) == rel(2 * y_nb));
    CHECK(issued_seconds(plan, times.data(), Overlap{}, qkv_y) == rel(y_ar));
  }
}

TEST_CASE("cost: placement links of a grid on the Perlmutter-like profile") {
  const MachineProfile p = fftest::perlmutter_like();
  // 4,2,2,2 in xyzd: X stride 1 size 4 inside (225); Y stride 4, Z stride 8,
  // D stride 16, all size 2 across nodes with c = min(s, 4) = 4 (20 GB/s).
  auto links = placement_links(p, kGrid, Order{});
  CHECK(links[int(Axis::X)].inside);
  CHECK(links[int(Axis::X)].intra.busbw == 225e9);
  for (Axis ax : {Axis::Y, Axis::Z, Axis::D}) {
    CHECK(links[int(ax)].across);
    CHECK(links[int(ax)].inter.busbw == rel(80e9 / 4));
  }
  // yxzd: Y stride 1 size 2 inside (76); X stride 2 size 4 across, c = 2 (40).
  links = placement_links(p, kGrid, parse_order("yxzd"));
  CHECK(links[int(Axis::Y)].intra.busbw == 76e9);
  CHECK(links[int(Axis::X)].groups_per_node == 2);
  CHECK(links[int(Axis::X)].inter.busbw == rel(80e9 / 2));
  // Memoized links are the same links.
  LinkCache cache(p, kGrid.total());
  for (const Order& o : distinct_orders(kGrid)) {
    auto direct = placement_links(p, kGrid, o), cached = placement_links(p, kGrid, o, &cache);
    for (Axis ax : kAxes) {
      CHECK(direct[int(ax)].groups_per_node == cached[int(ax)].groups_per_node);
      CHECK(direct[int(ax)].intra.busbw == cached[int(ax)].intra.busbw);
      CHECK(direct[int(ax)].inter.busbw == cached[int(ax)].inter.busbw);
    }
  }
}

TEST_CASE("cost: placement links count a tensor axis' groups per stage, the data axis' over every stage") {
  const MachineProfile p = fftest::toy_machine(4);  // node link 80 GB/s, shared as 80 / c
  // 1,1,4,2 with 2 stages on 16 ranks, 4 a node, order xypdz: P stride 1,
  // D stride 2, Z stride 4. Z's groups {r, r+4, r+8, r+12}, r = 0…3, each
  // with one member on node 0, whose ranks 0-3 are stages 0, 1, 0, 1: 2
  // groups of each stage, so c = 2, not 4.
  auto links = placement_links(p, Grid{1, 1, 4, 2, 2}, parse_order("xypdz"));
  CHECK(links[int(Axis::Z)].groups_per_node == 2);
  CHECK(links[int(Axis::Z)].inter.busbw == rel(80e9 / 2));
  // One stage, D of 4 in its place: all 4 groups are its own.
  CHECK(placement_links(p, Grid{1, 1, 4, 4, 1}, parse_order("xypdz"))[int(Axis::Z)].groups_per_node == 4);
  // The data axis counts every stage's groups: its reductions meet at the
  // end of the step. 1,1,2,4 with 2 stages, order xypzd: D stride 4,
  // {r, r+4, r+8, r+12}, node 0's ranks in stages 0, 1, 0, 1: c = 4.
  links = placement_links(p, Grid{1, 1, 2, 4, 2}, parse_order("xypzd"));
  CHECK(links[int(Axis::Z)].inside);
  CHECK(links[int(Axis::D)].groups_per_node == 4);
}

TEST_CASE("cost: predict refuses a grid that cannot split the job") {
  const MachineProfile p = fftest::toy_machine(4);
  Config c;
  c.grid = Grid{4, 2, 2, 2};
  c.micro_batch = 3;  // 8 % (3·2·2) ≠ 0
  CHECK_THROWS_AS(predict(toy_job(), p, c), InputError);
  c.micro_batch = 1;
  c.grid = Grid{8, 1, 2, 2};  // still 32 ranks; fine for H = 64
  CHECK_NOTHROW(predict(toy_job(), p, c));
  c.grid = Grid{1, 8, 2, 2};  // 4 heads over 8 Y ranks
  CHECK_THROWS_AS(predict(toy_job(), p, c), InputError);
  c.grid = Grid{4, 2, 2, 1};  // 16 ranks, not 32
  CHECK_THROWS_AS(predict(toy_job(), p, c), InputError);
}
