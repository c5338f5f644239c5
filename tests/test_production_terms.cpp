// What production runs show about the model (MODEL.md §10): data-parallel
// gradients bucketed under the backward (odp), the optimizer state sharded
// over data, unfused attention. Expectations by hand.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>

#include <nlohmann/json.hpp>

#include "advisor/core/model_spec.hpp"
#include "advisor/model/memory_model.hpp"
#include "advisor/model/pipeline_model.hpp"
#include "tests/helpers.hpp"

using namespace ff;
using fftest::rel;

TEST_CASE("odp: buckets against the backward they hide under, by hand") {
  // 4 buckets of 1 s (the last 0.5 s) over a backward of 8 s: one arrives
  // every 2 s and the link keeps up, so only the last runs past the end.
  CHECK(bucketed_exposed(4, 1, 0.5, 8) == rel(0.5));
  // Over a backward of 2 s the link is the bottleneck from the first bucket:
  // ready at 0.5, then 3 more of 1 s and the last 0.5: 0.5 + 3 + 0.5 − 2 = 2.
  CHECK(bucketed_exposed(4, 1, 0.5, 2) == rel(2));
  // One bucket is ready only when the backward ends: nothing hidden.
  CHECK(bucketed_exposed(1, 3, 3, 10) == rel(3));
  CHECK(bucketed_exposed(0, 0, 0, 10) == 0);
}

TEST_CASE("odp: the data-parallel gradients of the toy in 4 buckets") {
  // toy_model(2) on grid 1,1,1,2: 117,504 parameters' fp32 gradients,
  // 470,016 bytes, in buckets of 117,504 bytes: 4 all-reduces of 2 ranks
  // inside a node, each 2·5 µs + 117,504 B / 100 GB/s = 11.17504 µs.
  // PyTorch's kernels, and its DDP's bucket from the profile.
  Job job{fftest::toy_model(2), 2, 8, Dtype::BF16};
  job.fusion = Fusion::Unfused;
  MachineProfile p = fftest::toy_machine(4);
  p.dp_bucket_bytes = 117504;
  const Grid g{1, 1, 1, 2};
  const double a = 2 * 5e-6 + 117504 / 100e9;
  auto price = [&](const Overlap& ov, double h) {
    p.overlap_efficiency = h;
    StagedPlan sp;
    make_staged_plan(job, p, g, 1, Recompute::None, sp);
    StagedTimes st;
    staged_term_times(sp, placement_links(p, g, Order{}), pair_link(p, 2, 1, 1), st);
    CHECK(st.dp_buckets[0] == 4);
    CHECK(st.dp_bucket_s[0] == rel(a));
    return combine_staged(sp, st, ov, {}, 8 * 16);
  };
  const Overlap odp{false, false, false, true};
  // No overlap efficiency: the 4 buckets are all exposed, in place of the
  // per-layer all-reduces.
  Estimate off = price(Overlap{}, 0), none = price(odp, 0);
  CHECK(none.exposed_comm_s[int(Axis::D)] == rel(4 * a));
  CHECK(none.time_s == rel(off.time_s - off.exposed_comm_s[int(Axis::D)] + 4 * a));
  // Full efficiency: what runs past the last micro-step's backward b.
  Estimate all = price(odp, 1);
  const double b = all.bwd_s;
  CHECK(all.exposed_comm_s[int(Axis::D)] == rel(std::max(a, b / 4 + 3 * a + a - b)));
  CHECK(all.comm_s[int(Axis::D)] == rel(4 * a));
}

TEST_CASE("odp: Megatron's kernels bucket as Megatron-Core does, max(40 M, 1 M · G_d) parameters") {
  // fp32 gradients: 40 M parameters are 160 MB a bucket up to G_d = 40, then
  // 1 M · G_d (G_d = 128: 512 MB), whatever the profile's PyTorch bucket.
  const MachineProfile p = fftest::toy_machine(4);
  for (int d : {2, 40, 128}) {
    Job job{fftest::toy_model(2), d, 8 * d, Dtype::BF16};
    Plan plan;
    make_plan(job, p, Grid{1, 1, 1, d}, 1, Recompute::None, plan);
    CAPTURE(d);
    CHECK(plan.dp_bucket_bytes == rel(4.0 * std::max(40e6, 1e6 * d)));
    job.fusion = Fusion::Engine;
    make_plan(job, p, Grid{1, 1, 1, d}, 1, Recompute::None, plan);
    CHECK(plan.dp_bucket_bytes == rel(p.dp_bucket_bytes));
  }
}

TEST_CASE("sharded optimizer: memory, collectives and the optimizer over D, by hand") {
  // toy_model(2) on grid 1,1,1,2 (117,504 parameters a rank), bf16: the
  // weight and the fp32 gradient shard whole (6 bytes), master, m and v
  // halved (12/2): 117,504·12 = 1,410,048 bytes.
  Job job{fftest::toy_model(2), 2, 8, Dtype::BF16};
  MachineProfile p = fftest::toy_machine(4);
  const Grid g{1, 1, 1, 2};
  CHECK(memory_use(job, p, g, 1, Recompute::None, Overlap{}, {false, true}).states == rel(117504.0 * 12));
  CHECK(memory_use(job, p, Grid{1, 1, 1, 1}, 1, Recompute::None, Overlap{}, {false, true}).states == rel(117504.0 * 18));
  // The data axis: 11 reductions (4 layers × 2 blocks, embedding, head,
  // replicated), 2 ranks inside a node (α 5 µs, 100 GB/s): reduce-scatter of
  // the fp32 gradients, α + ½·4·elements/bw each, then all-gather of the bf16
  // weights, α + ½·2·elements/bw each; 117,504 elements in all:
  //   RS 11·5 µs + 2·117,504/100e9, AG 11·5 µs + 117,504/100e9.
  const double rs = 11 * 5e-6 + 2 * 117504 / 100e9, ag = 11 * 5e-6 + 117504 / 100e9;
  StagedPlan sp;
  make_staged_plan(job, p, g, 1, Recompute::None, sp);
  StagedTimes st;
  staged_term_times(sp, placement_links(p, g, Order{}), pair_link(p, 2, 1, 1), st);
  CHECK(st.dp_reduce_scatter_s[0] == rel(rs));
  CHECK(st.dp_all_gather_s[0] == rel(ag));
  Estimate plain = combine_staged(sp, st, Overlap{}, {}, 8 * 16);
  Estimate sharded = combine_staged(sp, st, Overlap{}, {false, true}, 8 * 16);
  CHECK(sharded.exposed_comm_s[int(Axis::D)] == rel(rs + ag));
  // The optimizer (AdamW: 34 bytes a parameter at 1 TB/s × 0.5) on half.
  const double adam = 117504.0 * 34 / 0.5e12;
  CHECK(sp.plan[0].compute_step_s == rel(adam));
  CHECK(sharded.compute_s == rel(plain.compute_s - adam / 2));
  CHECK(sharded.time_s ==
        rel(plain.time_s - plain.exposed_comm_s[int(Axis::D)] + rs + ag - adam / 2));
  // One data-parallel rank: nothing to shard, nothing changes.
  job.gpus = 1;
  StagedPlan one;
  make_staged_plan(job, p, Grid{1, 1, 1, 1}, 1, Recompute::None, one);
  StagedTimes t1;
  staged_term_times(one, placement_links(p, Grid{1, 1, 1, 1}, Order{}), pair_link(p, 1, 1, 1), t1);
  CHECK(combine_staged(one, t1, Overlap{}, {false, true}, 8 * 16).time_s ==
        combine_staged(one, t1, Overlap{}, {}, 8 * 16).time_s);
}

namespace {

double compute_term(const Plan& plan, const std::string& what) {
  for (const ComputeTerm& c : plan.compute)
    if (std::string(c.layer) == "attention" && c.what == what) return c.seconds;
  FAIL("no attention term '" << what << "'");
  return 0;
}

}  // namespace

TEST_CASE("unfused attention: FLOPs, traffic and memory of one layer, by hand") {
  // toy_model(2), bf16, micro-batch 1, one rank: A = 4 heads, S = 16, H = 64.
  // E = 1·4·16² = 1,024 scores. QKᵀ and PV over the full S×S: 4·16²·64 =
  // 65,536 FLOP at 100 TFLOP/s × 0.25. Softmax forward 2·2·E = 4,096 bytes,
  // backward 3·2·E = 6,144, at 1 TB/s × 0.5; dropout adds 2·2·E + E = 5,120
  // each way. Saved per block: the probabilities, t·A·S·2 = 2,048 bytes (and
  // the byte mask, 1,024, with dropout).
  Job job{fftest::toy_model(2), 1, 8, Dtype::BF16};
  MachineProfile p = fftest::toy_machine(4);
  const Grid g{1, 1, 1, 1};
  const double flash_act = memory_use(job, p, g, 1, Recompute::None, Overlap{}).activations;
  job.model.attention = Attention::Unfused;
  Plan plan;
  make_plan(job, p, g, 1, Recompute::None, plan);
  CHECK(compute_term(plan, "fwd QK^T and PV (unfused, full S×S)") == rel(65536 / 25e12));
  CHECK(compute_term(plan, "bwd QK^T and PV (unfused)") == rel(2 * 65536 / 25e12));
  CHECK(compute_term(plan, "fwd scores softmax (unfused)") == rel(4096 / 0.5e12));
  CHECK(compute_term(plan, "bwd softmax (unfused)") == rel(6144 / 0.5e12));
  // Two blocks' saved activations grow by 2,048 bytes each.
  CHECK(memory_use(job, p, g, 1, Recompute::None, Overlap{}).activations == rel(flash_act + 2 * 2048));
  job.model.attention_dropout = true;
  make_plan(job, p, g, 1, Recompute::None, plan);
  CHECK(compute_term(plan, "fwd scores softmax + dropout (unfused)") == rel((4096 + 5120) / 0.5e12));
  CHECK(compute_term(plan, "bwd softmax (unfused)") == rel((6144 + 5120) / 0.5e12));
  CHECK(memory_use(job, p, g, 1, Recompute::None, Overlap{}).activations == rel(flash_act + 2 * 3072));
}

TEST_CASE("unfused attention: the model file") {
  ModelSpec m = model_from_json(nlohmann::json::parse(R"({"layers": 2, "hidden": 64, "heads": 4, "vocab": 100,
      "seq_len": 16, "attention": "unfused", "attention_dropout": true})"), "m.json");
  CHECK(m.attention == Attention::Unfused);
  CHECK(m.attention_dropout);
  CHECK(model_from_json(to_json(m), "again.json").attention == Attention::Unfused);
  CHECK(to_json(fftest::toy_model()).contains("attention") == false);  // flash files read back unchanged
  for (const char* bad : {R"("attention": "fused")", R"("attention": 3)", R"("attention_dropout": true)"}) {
    CAPTURE(bad);
    std::string text = std::string(R"({"layers": 2, "hidden": 64, "heads": 4, "vocab": 100, "seq_len": 16, )") + bad + "}";
    CHECK_THROWS_AS(model_from_json(nlohmann::json::parse(text), "m.json"), InputError);
  }
}

TEST_CASE("odp with the sharded optimizer under Megatron's kernels: the weights' all-gather bucketed under the next forward") {
  // A model of ~100 M parameters on grid 1,1,1,2 of the toy (inside a node:
  // α 5 µs, 100 GB/s), its GEMMs made slow enough that every forward and
  // backward outlasts the link: ODP's reduce-scatter and the parameter
  // all-gather each leave only their last bucket exposed, at h = 1.
  Job job{ModelSpec{"wide", 2, 2048, 16, 8192, 128, 128, 16}, 2, 8, Dtype::BF16};
  MachineProfile p = fftest::toy_machine(4);
  p.gemm_bf16 = fftest::flat_gemm(1e-5);
  p.overlap_efficiency = 1;
  const Grid g{1, 1, 1, 2};
  StagedPlan sp;
  make_staged_plan(job, p, g, 1, Recompute::None, sp);
  const Plan& plan = sp.plan[0];
  REQUIRE(plan.overlap_param_gather);
  // Buckets of 40 M parameters' fp32 gradients, 160 MB; the last what is left.
  const double bucket = 160e6, n = std::ceil(plan.dp_bytes / bucket), last = plan.dp_bytes - (n - 1) * bucket;
  REQUIRE(n >= 2);
  auto ring = [](double bytes) { return 5e-6 + 0.5 * bytes / 100e9; };  // 2 ranks: one step of half the buffer
  StagedTimes st;
  staged_term_times(sp, placement_links(p, g, Order{}), pair_link(p, 2, 1, 1), st);
  CHECK(st.dp_ag_bucket_s[0] == rel(ring(bucket / 2)));  // bf16 weights: half the gradient bytes
  CHECK(st.dp_ag_last_bucket_s[0] == rel(ring(last / 2)));
  const Estimate e = combine_staged(sp, st, Overlap{false, false, false, true}, {false, true}, 8 * 16);
  CHECK(e.exposed_comm_s[int(Axis::D)] == rel(ring(last) + ring(last / 2), 1e-9));
  CHECK(e.comm_s[int(Axis::D)] == rel((n - 1) * (ring(bucket) + ring(bucket / 2)) + ring(last) + ring(last / 2), 1e-9));
  // The engine's kernels: no such overlap, the all-gather layer by layer and exposed.
  job.fusion = Fusion::Engine;
  make_staged_plan(job, p, g, 1, Recompute::None, sp);
  CHECK(!sp.plan[0].overlap_param_gather);
  staged_term_times(sp, placement_links(p, g, Order{}), pair_link(p, 2, 1, 1), st);
  const Estimate engine = combine_staged(sp, st, Overlap{false, false, false, true}, {false, true}, 8 * 16);
  // Its reduce-scatter in the profile's (PyTorch's) buckets, the last exposed.
  const double small = p.dp_bucket_bytes, m = std::ceil(plan.dp_bytes / small);
  CHECK(engine.exposed_comm_s[int(Axis::D)] == rel(ring(plan.dp_bytes - (m - 1) * small) + st.dp_all_gather_s[0], 1e-9));
}
