// Exhaustive search (MODEL.md §2 "Divisibility", "Search").
#include <doctest/doctest.h>

#include <cmath>

#include "advisor/model/search.hpp"
#include "tests/helpers.hpp"

using namespace ff;
using fftest::rel;

namespace {

Job toy_job(long long gpus, long long batch) {
  Job j;
  j.model = fftest::toy_model();  // H = 64, A = 4, F = 256, Vp = 128
  j.gpus = gpus;
  j.batch = batch;
  return j;
}

}  // namespace

TEST_CASE("search: divisibility filter on 12 GPUs") {
  // G = 12 has 40 ordered factorizations (2²·3: C(5,3)·C(4,3)). H = 64 allows
  // G_x ∈ {1, 2, 4}; A = 4 allows G_y ∈ {1, 2, 4} (F = 256 and Vp = 128 too);
  // B = 12 is divisible by any G_z·G_d dividing 12. Counting (x, y) with
  // x·y | 12, times the ordered (z, d) with z·d = 12/(x·y):
  //   x·y = 1  (1 pair):  12 → d(12) = 6
  //   x·y = 2  (2 pairs):  6 → d(6)  = 4 each
  //   x·y = 4  (3 pairs):  3 → d(3)  = 2 each
  // = 6 + 8 + 6 = 20 divisible grids.
  const MachineProfile p = fftest::toy_machine(4);
  SearchOptions one_stage;
  one_stage.pipelines = {1};
  SearchResult r = search(toy_job(12, 12), p, one_stage);
  CHECK(r.grids_total == 40);
  CHECK(r.grids_divisible == 20);
  CHECK(r.grids.size() == 20);
  for (const Grid& g : r.grids) {
    CAPTURE(g.str());
    CHECK(64 % g.x == 0);
    CHECK(4 % g.y == 0);
    CHECK(12 % (g.z * g.d) == 0);
  }
  for (const Candidate& c : r.candidates) {
    Config cfg = candidate_config(c, r.grids, Dtype::BF16);
    CHECK(64 % cfg.grid.x == 0);
    CHECK(4 % cfg.grid.y == 0);
    CHECK(12 % (cfg.micro_batch * cfg.grid.z * cfg.grid.d) == 0);
  }
  CHECK(r.feasible > 0);
  CHECK(r.evaluated >= r.feasible);
  CHECK_FALSE(r.split_reasons.empty());
}

TEST_CASE("search: a batch no grid can split") {
  // 3 GPUs: G_x = 3 does not divide H = 64, G_y = 3 does not divide 4 heads,
  // and G_z·G_d = 3 does not divide B = 2. All 4 factorizations fail.
  SearchResult r = search(toy_job(3, 2), fftest::toy_machine(4), SearchOptions{});
  CHECK(r.grids_total == 4);
  CHECK(r.grids_divisible == 0);
  CHECK(r.evaluated == 0);
  CHECK(r.feasible == 0);
  CHECK(r.top.empty());
  CHECK(r.split_reasons.size() == 3);  // hidden, heads, batch
}

TEST_CASE("search: evaluated counts each distinct configuration once (2 GPUs, B = 2)") {
  // Grids 2,1,1,1 and 1,2,1,1: one placement each; micro-batch 1 or 2 (B/(G_z·G_d) = 2);
  // recompute on/off; overlap none or OAR (ORS and OAG need G_z > 1) → 1·2·2·2 = 8 each,
  // and 1,2,1,1 with sequence parallelism (16 or 32 tokens over G_y = 2),
  // where OTP comes with it and OAR, with G_x = 1, has nothing left to hide:
  // 1·2·2·1 = 4 more, 12. 1,1,2,1: micro-batch 1; recompute ×2; none, ORS, OAG,
  // ORS+OAG (OAR needs G_x or G_y > 1) → 1·2·4 = 8. 1,1,1,2: micro-batch 1,
  // recompute ×2, none or ODP × the optimizer state whole or sharded (both
  // need G_d > 1) → 8.
  SearchOptions one_stage;
  one_stage.pipelines = {1};
  SearchResult r = search(toy_job(2, 2), fftest::toy_machine(4), one_stage);
  CHECK(r.grids_divisible == 4);
  CHECK(r.evaluated == 8 + 12 + 8 + 8);
  CHECK(r.feasible == 36);  // toy_machine has room for everything

  // The toy's 2 layers make 2 stages possible: grid 1,1,1,1 with P = 2, one
  // placement, micro-batch 1 or 2, recompute ×2, no flag (no X, Y or Z) → 4.
  SearchOptions two_stages;
  two_stages.pipelines = {2};
  SearchResult s = search(toy_job(2, 2), fftest::toy_machine(4), two_stages);
  CHECK(s.grids_total == 1);
  CHECK(s.evaluated == 4);
  REQUIRE(s.grids.size() == 1);
  CHECK(s.grids[0].p == 2);
  // By default both depths are searched.
  SearchResult both = search(toy_job(2, 2), fftest::toy_machine(4), SearchOptions{});
  CHECK(both.grids_divisible == 5);
  CHECK(both.evaluated == 36 + 4);
}

TEST_CASE("search: gpt-80b on 1024 Perlmutter GPUs") {
  const MachineProfile p = load_machine("perlmutter");
  Job job;
  job.model = load_model("gpt-80b");
  job.gpus = 1024;
  job.batch = 1024;
  SearchOptions opt;
  opt.top = 5;
  SearchResult r = search(job, p, opt);
  // P ∈ {1, 2} (divisors of the 42 layers that divide 1024); ordered
  // factorizations of 2^10 and 2^9 over X, Y, Z, D: C(13,3) + C(12,3).
  CHECK(r.grids_total == 286 + 220);
  CHECK(r.feasible > 0);
  CHECK(r.evaluated >= r.feasible);
  REQUIRE(r.top.size() == 5);
  REQUIRE(r.candidates.size() >= 5);
  for (size_t i = 0; i < r.top.size(); ++i) {
    const Ranked& top = r.top[i];
    CAPTURE(top.config.grid.str());
    CAPTURE(top.config.order.str());
    if (i > 0) CHECK(r.top[i - 1].estimate.time_s <= top.estimate.time_s);
    // Every grid respects divisibility: 12288 % G_x, 96 % G_y, 1024 % (mb·G_z·G_d).
    CHECK(12288 % top.config.grid.x == 0);
    CHECK(96 % top.config.grid.y == 0);
    CHECK(1024 % (top.config.micro_batch * top.config.grid.z * top.config.grid.d) == 0);
    CHECK(top.config.grid.total() == 1024);
    // The search's own price of the candidate, and predict() of the same config.
    Prediction pr = predict(job, p, top.config);
    CHECK(pr.estimate.time_s == rel(top.estimate.time_s, 1e-9));
    CHECK(pr.estimate.time_s == rel(r.candidates[i].time_s, 1e-9));
    CHECK(candidate_config(r.candidates[i], r.grids, job.dtype) == top.config);
    CHECK(pr.memory.total() <= p.hbm_capacity);
    CHECK(pr.estimate.mfu > 0);
    CHECK(pr.estimate.mfu < 1);
  }
  for (size_t i = 1; i < r.candidates.size(); ++i) CHECK(r.candidates[i - 1].time_s <= r.candidates[i].time_s);
}

namespace {

// Every field of two searches' results, exactly (the times too: the same
// arithmetic in the same order, whichever thread did it).
void check_same(const SearchResult& a, const SearchResult& b) {
  CHECK(a.evaluated == b.evaluated);
  CHECK(a.feasible == b.feasible);
  CHECK(a.grids_total == b.grids_total);
  CHECK(a.grids_divisible == b.grids_divisible);
  REQUIRE(a.grids.size() == b.grids.size());
  for (size_t i = 0; i < a.grids.size(); ++i) {
    CHECK(a.grids[i].str() == b.grids[i].str());
    CHECK(a.grids[i].p == b.grids[i].p);
  }
  REQUIRE(a.candidates.size() == b.candidates.size());
  for (size_t i = 0; i < a.candidates.size(); ++i) {
    const Candidate &x = a.candidates[i], &y = b.candidates[i];
    CAPTURE(i);
    CHECK(x.time_s == y.time_s);
    CHECK(x.grid == y.grid);
    CHECK(x.micro_batch == y.micro_batch);
    CHECK(x.order == y.order);
    CHECK(x.flags == y.flags);
  }
  CHECK(a.equivalent_orders == b.equivalent_orders);
  REQUIRE(a.top.size() == b.top.size());
  for (size_t i = 0; i < a.top.size(); ++i) {
    CHECK(a.top[i].config == b.top[i].config);
    CHECK(a.top[i].estimate.time_s == b.top[i].estimate.time_s);
    CHECK(a.top[i].memory.total() == b.top[i].memory.total());
    CHECK(a.top[i].equivalent_orders == b.top[i].equivalent_orders);
  }
  REQUIRE(a.rejected.size() == b.rejected.size());
  for (size_t i = 0; i < a.rejected.size(); ++i) {
    CHECK(a.rejected[i].grid.str() == b.rejected[i].grid.str());
    CHECK(a.rejected[i].grid.p == b.rejected[i].grid.p);
    CHECK(a.rejected[i].micro_batch == b.rejected[i].micro_batch);
    CHECK(a.rejected[i].recompute == b.rejected[i].recompute);
    CHECK(a.rejected[i].reason == b.rejected[i].reason);
  }
  CHECK(a.split_reasons == b.split_reasons);
  CHECK(a.smallest_footprint == b.smallest_footprint);
  CHECK(a.smallest_config == b.smallest_config);
}

}  // namespace

TEST_CASE("search: threads and pruning change nothing but the wall time") {
  // gpt-80b on 1024 Perlmutter GPUs: stages, offload, grids that do not
  // divide, configurations that do not fit and many bounded out of the
  // ranking; the toy on 12 GPUs: more threads than some depths have grids.
  // The reference prices every configuration on one thread.
  Job big;
  big.model = load_model("gpt-80b");
  big.gpus = 1024;
  big.batch = 1024;
  SearchOptions opt;
  opt.keep_rejected = true;
  struct Case {
    Job job;
    MachineProfile machine;
  };
  for (const Case& c : {Case{big, load_machine("perlmutter")}, Case{toy_job(12, 12), fftest::toy_machine(4)}}) {
    CAPTURE(c.job.model.name);
    opt.threads = 1;
    opt.prune = false;
    SearchResult one = search(c.job, c.machine, opt);
    CHECK(one.threads == 1);
    REQUIRE_FALSE(one.top.empty());
    opt.prune = true;
    for (int n : {1, 2, 3}) {
      CAPTURE(n);
      opt.threads = n;
      SearchResult many = search(c.job, c.machine, opt);
      CHECK(many.threads == n);
      check_same(one, many);
    }
  }
  // Every core by default; a negative count is bad input.
  CHECK(search(toy_job(2, 2), fftest::toy_machine(4), SearchOptions{}).threads >= 1);
  opt.threads = -1;
  CHECK_THROWS_AS(search(toy_job(2, 2), fftest::toy_machine(4), opt), InputError);
}
