// Sequence parallelism on Y (MODEL.md §13), by hand on the toy GPT.
//
// Model: L = 2, H = 64, A = 4, F = 256, Vp = 128, S = 16. Grid 1,4,1,2 (Y = 4,
// D = 2) on 8 GPUs, batch 4, micro-batch 1: 2 micro-steps of t = 16 tokens,
// 4 per Y rank in the split regions.
#include <doctest/doctest.h>

#include <array>
#include <cstring>

#include "advisor/model/prediction.hpp"
#include "advisor/model/search.hpp"
#include "advisor/output/launch.hpp"
#include "tests/helpers.hpp"
#include "tests/plan_terms.hpp"

using namespace ff;
using fftest::contains;
using fftest::input_error_of;
using fftest::rel;

namespace {

Job toy_job() {
  Job j;
  j.model = fftest::toy_model();
  j.gpus = 8;
  j.batch = 4;
  return j;
}

const Grid kGrid{1, 4, 1, 2};

}  // namespace

TEST_CASE("sequence parallel: Y's all-reduces become reduce-scatters and all-gathers, and the re-gathers") {
  Plan plan;
  make_plan(toy_job(), fftest::toy_machine(8), kGrid, 1, Recompute::None, plan, stage_of(toy_job(), kGrid, 0), true);
  REQUIRE(plan.sequence_parallel);
  // Every buffer is [t, H] = 16 × 64 = 1024 elements, counted gathered.
  struct Want {
    const char *layer, *what;
    Coll coll;
    double count;  // per micro-step
    Hide hide;
  };
  const Want want[] = {
      {"qkv", "fwd input all-gather (sequence parallel)", Coll::AllGather, 2, Hide::TpForward},
      {"attn_out", "fwd output reduce-scatter (sequence parallel)", Coll::ReduceScatter, 2, Hide::TpForward},
      {"fc1", "fwd input all-gather (sequence parallel)", Coll::AllGather, 2, Hide::TpForward},
      {"fc2", "fwd output reduce-scatter (sequence parallel)", Coll::ReduceScatter, 2, Hide::TpForward},
      {"qkv", "bwd input-grad reduce-scatter (sequence parallel)", Coll::ReduceScatter, 2, Hide::SpReduceScatter},
      {"qkv", "bwd input re-gather (sequence parallel)", Coll::AllGather, 2, Hide::SpGather},
      {"attn_out", "bwd output-grad all-gather (sequence parallel)", Coll::AllGather, 2, Hide::TpBackward},
      {"fc1", "bwd input-grad reduce-scatter (sequence parallel)", Coll::ReduceScatter, 2, Hide::SpReduceScatter},
      {"fc1", "bwd input re-gather (sequence parallel)", Coll::AllGather, 2, Hide::SpGather},
      {"fc2", "bwd output-grad all-gather (sequence parallel)", Coll::AllGather, 2, Hide::TpBackward},
      {"embedding", "fwd lookup reduce-scatter (sequence parallel)", Coll::ReduceScatter, 1, Hide::None},
      {"embedding", "bwd output-grad all-gather (sequence parallel)", Coll::AllGather, 1, Hide::None},
      {"lm_head", "fwd input all-gather (sequence parallel)", Coll::AllGather, 1, Hide::None},
      {"lm_head", "bwd input-grad reduce-scatter (sequence parallel)", Coll::ReduceScatter, 1, Hide::None},
      {"lm_head", "bwd input re-gather (sequence parallel)", Coll::AllGather, 1, Hide::None},
  };
  for (const Want& w : want) {
    INFO(w.layer, " / ", w.what);
    const CommTerm* c = fftest::comm_term(plan, w.layer, w.what);
    REQUIRE(c);
    CHECK(c->axis == Axis::Y);
    CHECK(c->coll == w.coll);
    CHECK(c->elements == 16 * 64);
    CHECK(c->count == w.count);
    CHECK(c->hide == w.hide);
  }
  // Once a step, the norms' weight gradients (each Y rank's saw its tokens
  // only): γ and β of two norms a block and the final one, 64 each, in fp32.
  const CommTerm* norms = fftest::comm_term(plan, "replicated", "norm grad all-reduce (sequence parallel)");
  REQUIRE(norms);
  CHECK((norms->axis == Axis::Y && norms->coll == Coll::AllReduce && norms->per_step));
  CHECK(norms->elements == (2 * 2 + 1) * 2 * 64);
  // No other all-reduce over Y is left.
  for (const auto& c : plan.comm) {
    INFO(c.layer, " / ", c.what);
    CHECK_FALSE((c.axis == Axis::Y && c.coll == Coll::AllReduce && std::strcmp(c.layer, "cross_entropy") != 0 &&
                 &c != norms));
  }
  // Bytes over Y per step, 2 micro-steps of bf16: forward 4 per block, backward
  // 6 per block, the embedding 2, the head 3; without, 2 + 2 per block, the
  // embedding's and the head's one each. Apart from both: the loss's
  // statistics, (max, then sum-exp and target) × t in fp32; with, the norms'.
  CHECK(bytes_per_step(plan)[int(Axis::Y)] - 2 * (1 + 2) * 16 * 4 ==
        2.0 * (2 * 4 + 2 * 6 + 2 + 3) * 1024 * 2 + (2 * 2 + 1) * 2 * 64 * 4);
  Plan without;
  make_plan(toy_job(), fftest::toy_machine(8), kGrid, 1, Recompute::None, without);
  CHECK(bytes_per_step(without)[int(Axis::Y)] - 2 * (1 + 2) * 16 * 4 == 2.0 * (2 * 2 + 2 * 2 + 1 + 1) * 1024 * 2);
  // A stage sends its split output, as Megatron's [S/TP, b, H] messages.
  CHECK(plan.message_elements == 16 * 64 / 4);
  CHECK(without.message_elements == 16 * 64);
  // The norms and residuals move a quarter of the tokens: 2·(t/4)·H·b.
  const ComputeTerm* ln = fftest::compute_term(plan, "layernorm", "fwd");
  REQUIRE(ln);
  CHECK(ln->seconds == rel(2.0 * 4 * 64 * 2 / 5e11));
}

TEST_CASE("sequence parallel: the norm and residual regions' activations divide by G_y") {
  // Per block, bf16: norm 1 and 2 in and out 4·t·H (now t/4 tokens), QKV out
  // t·3H/4, attention out t·H/4, FC1 and GELU out 2·t·F/4; log-sum-exp
  // t·(A/4)·4 B; the norms' statistics 2·2·t·4 B (t/4 tokens). Two blocks,
  // one micro-batch in flight.
  const double t = 16;
  auto block = [&](double split) {
    return t * (4 * 64 / split + 3 * 64 / 4 + 64 / 4 + 2 * 256 / 4) * 2 + t * 1 * 4 + 2 * 2 * t / split * 4;
  };
  const MachineProfile p = fftest::toy_machine(8);
  const MemoryUse on = memory_use(toy_job(), p, kGrid, 1, Recompute::None, Overlap{}, {}, true);
  const MemoryUse off = memory_use(toy_job(), p, kGrid, 1, Recompute::None, Overlap{}, {}, false);
  CHECK(off.activations - on.activations == rel(2 * (block(1) - block(4))));
  // Recompute keeps each block's input, split too: t·H/4·b a block.
  const MemoryUse rc_on = memory_use(toy_job(), p, kGrid, 1, Recompute::Full, Overlap{}, {}, true);
  const MemoryUse rc_off = memory_use(toy_job(), p, kGrid, 1, Recompute::Full, Overlap{}, {}, false);
  CHECK(rc_off.activations - rc_on.activations == rel(2 * t * 64 * (1 - 0.25) * 2 + (block(1) - block(4))));
}

TEST_CASE("sequence parallel: the re-gather hides under the input-gradient GEMM; predict refuses what cannot split") {
  MachineProfile p = fftest::toy_machine(8);
  p.overlap_efficiency = 1;
  Config c;
  c.grid = kGrid;
  c.sequence_parallel = true;
  const Prediction pr = predict(toy_job(), p, c);
  for (size_t i = 0; i < pr.plan.comm.size(); ++i) {
    const CommTerm& t = pr.plan.comm[i];
    if (t.hide != Hide::SpGather) continue;
    INFO(t.layer);
    // The input-gradient GEMM (t, k_local, n_local) at 50 TFLOP/s, as hidden as it can be.
    const double n = std::strcmp(t.layer, "qkv") == 0 ? 3 * 64 / 4 : 256 / 4;
    const double dgrad = 2.0 * 16 * 64 * n / 50e12;
    CHECK(pr.term_hidden[i] == rel(std::min(pr.term_seconds[pr.plan.comm.size() + i], dgrad)));
  }
  c.grid = Grid{2, 1, 1, 4};
  CHECK(contains(input_error_of([&] { predict(toy_job(), p, c); }), "G_y = 1"));
  Job odd = toy_job();
  odd.model.seq_len = 15;  // 15 tokens over G_y = 4
  odd.model.heads = 4;
  c.grid = kGrid;
  CHECK(contains(input_error_of([&] { predict(odd, p, c); }), "do not divide over G_y = 4"));
}

TEST_CASE("otp: Transformer Engine pipelines Y's collectives with the GEMM each feeds or drains") {
  MachineProfile p = fftest::toy_machine(8);
  p.overlap_efficiency = 1;
  Config c;
  c.grid = kGrid;
  c.sequence_parallel = true;
  // Each block layer's GEMMs on a Y rank at 50 TFLOP/s (the toy's 100 at
  // efficiency 0.5): qkv [16, 64] × [64, 48], attn_out [16, 16] × [16, 64],
  // fc1 [16, 64] × [64, 64], fc2 [16, 64] × [64, 64]; forward, input- and
  // weight-gradient GEMMs each 2·16·k·n FLOPs.
  auto gemm = [](const char* layer) {
    const double kn = std::strcmp(layer, "qkv") == 0 ? 64.0 * 48 : std::strcmp(layer, "attn_out") == 0 ? 16.0 * 64 : 64.0 * 64;
    return 2.0 * 16 * kn / 50e12;
  };
  c.overlap = parse_overlap("otp");
  const Prediction on = predict(toy_job(), p, c);
  c.overlap = parse_overlap("none");
  const Prediction off = predict(toy_job(), p, c);
  const size_t n = on.plan.comm.size();
  int seen = 0;
  for (size_t i = 0; i < n; ++i) {
    const CommTerm& t = on.plan.comm[i];
    if (t.hide != Hide::TpForward && t.hide != Hide::TpBackward && t.hide != Hide::SpReduceScatter) continue;
    INFO(t.layer << ": " << t.what);
    ++seen;
    // Forward under the layer's forward GEMM; the output gradient's gather
    // under its input-gradient GEMM; the input gradient's scatter under the
    // weight-gradient GEMM (as OAR would). Each issued non-blocking.
    CHECK(on.term_hidden[i] == rel(std::min(on.term_seconds[n + i], gemm(t.layer))));
    CHECK(on.term_hidden[i] > 0);
    CHECK(off.term_hidden[i] == 0);
  }
  CHECK(seen == 8);  // four forward, two gathers, two scatters per block
  // What OTP hides comes off the Y axis' exposed time, and nothing else moves
  // but compute slowed under it (the toy's slowdown is 0).
  double hidden = 0;
  for (size_t i = 0; i < n; ++i)
    if (off.term_hidden[i] == 0) hidden += on.term_hidden[i] * per_iteration(on.plan, on.plan.comm[i]);
  CHECK(off.estimate.exposed_comm_s[int(Axis::Y)] - on.estimate.exposed_comm_s[int(Axis::Y)] == rel(hidden, 1e-9));
  CHECK(off.estimate.time_s - on.estimate.time_s == rel(hidden, 1e-9));

  // Megatron's flag on its line; the engine's line leaves otp out and says so.
  for (const LaunchLine& l : launch_lines(toy_job(), "toy.json", p, on.config)) {
    INFO(l.name << ": " << l.line);
    if (l.name == "megatron-axonn") CHECK(contains(l.line, "--sequence-parallel --tp-comm-overlap"));
    if (l.name == "mpirun") CHECK(!contains(l.line, "otp"));
    if (l.name == "mpirun") CHECK(contains(l.note, "without otp"));
  }

  // Without sequence parallelism there is nothing to pipeline; it is Transformer Engine's.
  c.overlap = parse_overlap("otp");
  c.sequence_parallel = false;
  CHECK(contains(input_error_of([&] { predict(toy_job(), p, c); }), "add --sequence-parallel"));
  c.sequence_parallel = true;
  Job eager = toy_job();
  eager.fusion = Fusion::Unfused;
  CHECK(contains(input_error_of([&] { predict(eager, p, c); }), "not --fusion unfused"));
}

TEST_CASE("otp: the search turns it on with every sequence-parallel plan of fused kernels, and only there") {
  const MachineProfile p = fftest::toy_machine(8);
  SearchOptions so;
  so.top = 100000;
  so.prune = false;
  auto flags = [&](const Job& job, const SearchOptions& o) {
    int sp_otp = 0, sp_bare = 0, otp_alone = 0;
    for (const Ranked& r : search(job, p, o).top) {
      if (r.config.sequence_parallel) (r.config.overlap.otp ? sp_otp : sp_bare)++;
      else if (r.config.overlap.otp) ++otp_alone;
    }
    return std::array<int, 3>{sp_otp, sp_bare, otp_alone};
  };
  const std::array<int, 3> fused = flags(toy_job(), so);
  CHECK(fused[0] > 0);
  CHECK(fused[1] == 0);
  CHECK(fused[2] == 0);
  Job eager = toy_job();
  eager.fusion = Fusion::Unfused;
  const std::array<int, 3> unfused = flags(eager, so);
  CHECK(unfused[0] == 0);
  CHECK(unfused[1] > 0);
  // --overlap names the flags: without otp, none; with it, every SP plan.
  so.fixed_overlap = true;
  so.overlap = parse_overlap("oar");
  CHECK(flags(toy_job(), so)[0] == 0);
  so.overlap = parse_overlap("oar,otp");
  const std::array<int, 3> pinned = flags(toy_job(), so);
  CHECK(pinned[0] > 0);
  CHECK(pinned[1] == 0);
  CHECK(pinned[2] == 0);

  // Transformer Engine's userbuffers stay inside a node: on 2 GPUs a node a
  // Y of 4 spans two, and neither the search nor predict gives it OTP.
  const MachineProfile narrow = fftest::toy_machine(2);
  SearchOptions all;
  all.top = 100000;
  all.prune = false;
  int wide_y = 0;
  for (const Ranked& r : search(toy_job(), narrow, all).top)
    if (r.config.sequence_parallel && r.config.grid.y == 4) {
      ++wide_y;
      CHECK(!r.config.overlap.otp);
    }
  CHECK(wide_y > 0);
  Config c;
  c.grid = kGrid;  // Y = 4
  c.sequence_parallel = true;
  c.overlap = parse_overlap("otp");
  CHECK(contains(input_error_of([&] { predict(toy_job(), narrow, c); }), "need the tensor-parallel (Y) groups inside a node"));
}
