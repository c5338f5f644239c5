// Memory per GPU (MODEL.md §2 "Memory") on the toy model, by hand.
//
// Model: L = 2, H = 64, A = 4, F = 256, Vp = 128, S = 16. Grid 2,2,3,1: G_z = 3
// divides no k·n/(G_x·G_y) but QKV's, so the padded shards
// ceil(k·n/(G_x·G_y)/G_z) are exercised.
#include <doctest/doctest.h>

#include <cmath>

#include "advisor/core/job.hpp"
#include "advisor/model/cost_model.hpp"
#include "advisor/model/memory_model.hpp"
#include "tests/helpers.hpp"

using namespace ff;
using fftest::rel;

namespace {

Job toy_job(Dtype dt = Dtype::BF16, int layers = 2) {
  Job j;
  j.model = fftest::toy_model(layers);
  j.gpus = 12;
  j.batch = 12;
  j.dtype = dt;
  return j;
}

const Grid kGrid{2, 2, 3, 1};

// Cell blocks k·n/(G_x·G_y) and their padded Z shards.
//   QKV      H → 3H normal:      (64/2)·(192/2) = 3072 → 3072/3 = 1024
//   attn_out H → H transposed:   (64/2)·(64/2)  = 1024 → ceil(341.3) = 342
//   FC1      H → F normal:       (64/2)·(256/2) = 4096 → ceil(1365.3) = 1366
//   FC2      F → H transposed:   (256/2)·(64/2) = 4096 → 1366
//   LM head  H → Vp normal:      (64/2)·(128/2) = 2048 → ceil(682.7) = 683
//   embedding Vp/G_y × H/G_x:    64·32          = 2048 → 683
constexpr double kSharded = 2 * (1024 + 342 + 1366 + 1366) + 683 + 683;  // 9562
// Replicated, per block: two LayerNorms' γ, β on H/G_x = 32 (4·32), QKV bias
// 3H/G_y = 96, attention-out bias H/G_x = 32, FC1 bias F/G_y = 128, FC2 bias
// 32; then the final LayerNorm 2·32 and positions S·H/G_x = 16·32.
constexpr double kReplicated = 2 * (4 * 32 + 96 + 32 + 128 + 32) + 2 * 32 + 16 * 32;  // 1408
// The largest gathered (padded) block: FC1/FC2's 1366·3.
constexpr double kLargest = 1366 * 3;

}  // namespace

TEST_CASE("memory: hand counts of the toy model's parameters") {
  CHECK(kSharded == 9562);
  CHECK(kReplicated == 1408);
  LocalParams lp = local_params(fftest::toy_model(), kGrid);
  CHECK(lp.sharded == kSharded);
  CHECK(lp.replicated == kReplicated);
  CHECK(lp.largest_block == kLargest);
  // Unsharded (G = 1) every parameter is counted once: the local count equals
  // the model's parameter count, 2 blocks of 4H² + 2HF + 3H + H + F + H + 4H,
  // the embedding and LM head 2·Vp·H, positions S·H, final LayerNorm 2H.
  const double H = 64, F = 256, Vp = 128, S = 16;
  const double total = 2 * (4 * H * H + 2 * H * F + 3 * H + H + F + H + 4 * H) + 2 * Vp * H + S * H + 2 * H;
  LocalParams one = local_params(fftest::toy_model(), Grid{1, 1, 1, 1});
  CHECK(one.sharded + one.replicated == total);
  CHECK(parameter_count(fftest::toy_model()) == total);
}

TEST_CASE("memory: optimizer states, 18 bytes a parameter in bf16, 16 in fp32") {
  const MachineProfile p = fftest::toy_machine(4);
  // bf16: bf16 weight 2 + fp32 master 4 + Adam m 4 + v 4 + fp32 gradient accumulator 4.
  MemoryUse bf = memory_use(toy_job(Dtype::BF16), p, kGrid, 1, Recompute::None, Overlap{});
  CHECK(bf.states == (kSharded + kReplicated) * (2 + 4 + 4 + 4 + 4));
  CHECK(bf.states == 10970.0 * 18);
  // fp32: weight, m, v, gradient, 4 bytes each; no master copy.
  MemoryUse fp = memory_use(toy_job(Dtype::FP32), p, kGrid, 1, Recompute::None, Overlap{});
  CHECK(fp.states == (kSharded + kReplicated) * 16);
  CHECK(bf.reserve == p.memory_reserve);
}

TEST_CASE("memory: gradients in the training dtype (--grad-dtype), AxoNN's 4 bytes a parameter under offload") {
  MachineProfile p = fftest::toy_machine(4);
  p.has_host = true, p.host_link_bw = p.host_node_bw = 1e9, p.host_memory = 1e12;
  Job job = toy_job(Dtype::FP16);
  job.grad_dtype = Dtype::FP16;
  // fp16 weight 2 + fp32 master 4 + m 4 + v 4 + fp16 accumulator 2.
  MemoryUse u = memory_use(job, p, kGrid, 1, Recompute::None, Overlap{});
  CHECK(u.states == 10970.0 * 16);
  // Offloaded, the GPU keeps the fp16 weight and the fp16 gradient: 4 bytes;
  // the host the master, m and v: 12.
  u = memory_use(job, p, kGrid, 1, Recompute::None, Overlap{}, OptimizerState{true, false});
  CHECK(u.states == 10970.0 * 4);
  CHECK(u.host == 10970.0 * 12);
  job.grad_dtype = Dtype::FP32;
  u = memory_use(job, p, kGrid, 1, Recompute::None, Overlap{}, OptimizerState{true, false});
  CHECK(u.states == 10970.0 * 6);
  // The data-parallel reductions leave the accumulator in its dtype: 2 bytes
  // an element in fp16, 4 in fp32.
  job.gpus = 24, job.batch = 24;
  const Grid with_data{2, 2, 3, 2};
  for (Dtype g : {Dtype::FP16, Dtype::FP32}) {
    job.grad_dtype = g;
    Plan plan;
    make_plan(job, p, with_data, 1, Recompute::None, plan);
    for (const CommTerm& c : plan.comm)
      if (c.axis == Axis::D) CHECK(c.elem_bytes == (g == Dtype::FP16 ? 2 : 4));
  }
}

TEST_CASE("memory: gathered and gradient buffers, doubled under OAG and ORS") {
  const MachineProfile p = fftest::toy_machine(4);
  const Job job = toy_job();
  MemoryUse none = memory_use(job, p, kGrid, 1, Recompute::None, Overlap{});
  CHECK(none.gathered == kLargest * 2);      // bf16, the current block
  CHECK(none.grad_buffers == kLargest * 2);  // one unsharded gradient before its reduce-scatter
  MemoryUse oag = memory_use(job, p, kGrid, 1, Recompute::None, Overlap{false, false, true});
  CHECK(oag.gathered == 2 * kLargest * 2);   // current + prefetched
  CHECK(oag.grad_buffers == kLargest * 2);
  MemoryUse ors = memory_use(job, p, kGrid, 1, Recompute::None, Overlap{false, true, false});
  CHECK(ors.gathered == kLargest * 2);
  CHECK(ors.grad_buffers == 2 * kLargest * 2);
  MemoryUse oar = memory_use(job, p, kGrid, 1, Recompute::None, Overlap{true, false, false});
  CHECK(oar.total() == none.total());  // OAR needs no extra buffer
  MemoryUse fp = memory_use(toy_job(Dtype::FP32), p, kGrid, 1, Recompute::None, Overlap{false, false, true});
  CHECK(fp.gathered == 2 * kLargest * 4);
}

TEST_CASE("memory: logits and the reserve") {
  const MachineProfile p = fftest::toy_machine(4);
  // Logits [t, Vp/G_y] in bf16 and their fp32 gradient: 16·64·(2 + 4).
  MemoryUse u = memory_use(toy_job(), p, kGrid, 1, Recompute::None, Overlap{});
  CHECK(u.logits == 16.0 * 64 * (2 + 4));
  MemoryUse u2 = memory_use(toy_job(), p, kGrid, 2, Recompute::None, Overlap{});  // t = 32
  CHECK(u2.logits == 32.0 * 64 * (2 + 4));
  CHECK(u.total() == u.states + u.gathered + u.grad_buffers + u.activations + u.logits + u.reserve);
}

TEST_CASE("memory: full recompute keeps only each layer's input") {
  const MachineProfile p = fftest::toy_machine(4);
  for (Overlap ov : {Overlap{}, Overlap{true, true, true}}) {
    MemoryUse rc = memory_use(toy_job(), p, kGrid, 1, Recompute::Full, ov);
    MemoryUse keep = memory_use(toy_job(), p, kGrid, 1, Recompute::None, ov);
    CHECK(rc.activations < keep.activations);
    CHECK(rc.total() < keep.total());
    CHECK(rc.states == keep.states);
  }
  // One more layer under recompute costs its input [t, H/G_x] in bf16:
  // 16·32·2 = 1024 bytes. Without recompute it costs every saved tensor of
  // the layer, which is more.
  const double layer_input = 16.0 * (64 / 2) * 2;
  MemoryUse rc2 = memory_use(toy_job(Dtype::BF16, 2), p, kGrid, 1, Recompute::Full, Overlap{});
  MemoryUse rc3 = memory_use(toy_job(Dtype::BF16, 3), p, kGrid, 1, Recompute::Full, Overlap{});
  CHECK(rc3.activations - rc2.activations == rel(layer_input));
  MemoryUse keep2 = memory_use(toy_job(Dtype::BF16, 2), p, kGrid, 1, Recompute::None, Overlap{});
  MemoryUse keep3 = memory_use(toy_job(Dtype::BF16, 3), p, kGrid, 1, Recompute::None, Overlap{});
  CHECK(keep3.activations - keep2.activations > layer_input);
  // Activations grow with the micro-batch.
  MemoryUse rc_mb2 = memory_use(toy_job(), p, kGrid, 2, Recompute::Full, Overlap{});
  CHECK(rc_mb2.activations == rel(2 * rc2.activations));
}
