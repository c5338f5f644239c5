// Selective recompute (MODEL.md §13): backward recomputes the attention core
// alone, so the S×S probabilities are not kept. Held against Korthikanti et
// al. 2022 ("Reducing activation recomputation in large transformer
// models", §4): per layer 34·s·b·h + 5·a·s²·b bytes of 16-bit activations
// and masks, of which selective recompute drops the 5·a·s²·b, at the cost of
// the core's forward again (QKᵀ and PV: 4·b·s²·h FLOPs per layer).
#include <doctest/doctest.h>

#include "advisor/core/job.hpp"
#include "advisor/model/cost_model.hpp"
#include "advisor/model/memory_model.hpp"
#include "advisor/model/prediction.hpp"
#include "advisor/model/search.hpp"
#include "advisor/output/launch.hpp"
#include "tests/helpers.hpp"

using namespace ff;
using fftest::rel;

namespace {

// One rank, bf16, no dropout anywhere: the toy model (H = 64, A = 4, F = 4H,
// S = 16) with unfused attention.
Job unfused_job(int layers, int batch = 2) {
  Job j;
  j.model = fftest::toy_model(layers);
  j.model.attention = Attention::Unfused;
  j.gpus = 1;
  j.batch = batch;
  j.dtype = Dtype::BF16;
  return j;
}

}  // namespace

TEST_CASE("selective recompute: one GPT layer's activations against Korthikanti's formula") {
  const MachineProfile p = fftest::toy_machine(1);
  const double s = 16, b = 2, h = 64, a = 4;  // sequence, micro-batch, hidden, heads
  auto per_layer = [&](Recompute rc) {
    // A layer's share: the difference a third layer makes.
    return memory_use(unfused_job(3), p, Grid{}, int(b), rc, Overlap{}).activations -
           memory_use(unfused_job(2), p, Grid{}, int(b), rc, Overlap{}).activations;
  };
  // Korthikanti's 34·sbh less the two dropout masks (sbh each) this model
  // does not have, plus what it keeps in fp32 beside them: the softmax's
  // log-sum-exp per head and token (4·a·s·b) and LayerNorm's two statistics
  // per token for each of two norms (2·2·4·s·b).
  const double kept = 32 * s * b * h + 4 * a * s * b + 16 * s * b;
  // The attention core's S×S: Korthikanti's 5·a·s²·b is the softmax output
  // (2·as²b), dropout's mask (as²b) and output (2·as²b); without dropout
  // the softmax output alone.
  const double scores = 2 * a * s * s * b;
  CHECK(per_layer(Recompute::None) == rel(kept + scores));
  CHECK(per_layer(Recompute::Selective) == rel(kept));
  // The one layer being recomputed holds its probabilities for the while.
  const MemoryUse none = memory_use(unfused_job(2), p, Grid{}, int(b), Recompute::None, Overlap{});
  const MemoryUse sel = memory_use(unfused_job(2), p, Grid{}, int(b), Recompute::Selective, Overlap{});
  CHECK(none.activations - sel.activations == rel(2 * scores - scores));
  // Flash attention keeps no S×S: selective saves nothing there.
  Job flash = unfused_job(2);
  flash.model.attention = Attention::Flash;
  CHECK(memory_use(flash, p, Grid{}, 2, Recompute::Selective, Overlap{}).activations ==
        memory_use(flash, p, Grid{}, 2, Recompute::None, Overlap{}).activations);
}

TEST_CASE("selective recompute: the attention core's forward again in backward, FLOPs and time") {
  const MachineProfile p = fftest::toy_machine(1);
  const Job job = unfused_job(2, 4);
  Plan none, sel, full;
  make_plan(job, p, Grid{}, 2, Recompute::None, none);
  make_plan(job, p, Grid{}, 2, Recompute::Selective, sel);
  make_plan(job, p, Grid{}, 2, Recompute::Full, full);
  // Korthikanti: 4·b·s²·h per layer (QKᵀ and PV), over the batch's 4
  // sequences and 2 layers.
  const double B = 4, S = 16, H = 64, L = 2;
  CHECK(sel.hardware_flops - sel.model_flops == rel(4 * B * S * S * H * L));
  CHECK(none.hardware_flops == none.model_flops);
  CHECK(full.hardware_flops > sel.hardware_flops);
  // The terms: the forward's GEMMs and softmax once more per layer, in backward.
  auto term = [](const Plan& pl, const std::string& what) -> const ComputeTerm* {
    for (const ComputeTerm& c : pl.compute)
      if (c.layer == std::string("attention") && c.what == what) return &c;
    return nullptr;
  };
  const ComputeTerm* fwd = term(sel, "fwd QK^T and PV (unfused, full S×S)");
  const ComputeTerm* again = term(sel, "bwd recompute QK^T and PV (selective)");
  const ComputeTerm* softmax = term(sel, "fwd scores softmax (unfused)");
  const ComputeTerm* softmax_again = term(sel, "bwd recompute softmax (selective)");
  REQUIRE(fwd);
  REQUIRE(again);
  REQUIRE(softmax);
  REQUIRE(softmax_again);
  CHECK(again->bwd);
  CHECK(again->count == L);
  // By hand, per layer and micro-step (micro-batch 2, one rank, the toy
  // machine: bf16 attention at 100e12·0.25, memory at 1e12·0.5, no launch
  // cost): QKᵀ and PV 4·2·16²·64 = 131,072 FLOPs; the softmax reads and
  // writes E = 2·4·16² = 2,048 bf16 scores, 8,192 bytes.
  const double core = 131072 / 25e12, scores = 8192 / 0.5e12;
  CHECK(again->seconds == rel(core));
  CHECK(softmax_again->seconds == rel(scores));
  CHECK(fwd->seconds == rel(core));
  CHECK(softmax->seconds == rel(scores));
  CHECK(term(none, "bwd recompute QK^T and PV (selective)") == nullptr);
  REQUIRE(none.micro_steps == 2);  // 4 sequences in micro-batches of 2
  CHECK(sel.compute_s - none.compute_s == rel(L * 2 * (core + scores), 1e-9));
  CHECK(sel.compute_s < full.compute_s);
}

TEST_CASE("selective recompute: searched where attention is unfused, and spelled in launch lines") {
  const MachineProfile p = fftest::toy_machine(1);
  Job job = unfused_job(2, 4);
  SearchOptions opt;
  opt.recompute = {Recompute::Selective};
  SearchResult r = search(job, p, opt);
  REQUIRE(!r.top.empty());
  for (const Ranked& x : r.top) CHECK(x.config.recompute == Recompute::Selective);
  // Flash: selective keeps and costs what none does, so beside none it is not tried.
  job.model.attention = Attention::Flash;
  opt.recompute = {Recompute::None, Recompute::Selective};
  r = search(job, p, opt);
  REQUIRE(!r.top.empty());
  for (const Ranked& x : r.top) CHECK(x.config.recompute == Recompute::None);

  Config c;
  c.recompute = Recompute::Selective;
  c.dtype = Dtype::BF16;
  std::string mega, engine;
  for (const LaunchLine& l : launch_lines(unfused_job(2, 4), "toy.json", p, c, 0)) {
    if (l.name == "megatron-axonn") mega = l.line;
    if (l.name == "mpirun") engine = l.line;
  }
  CHECK(mega.find(" --recompute-granularity selective") != std::string::npos);
  CHECK(mega.find("--recompute-method") == std::string::npos);
  CHECK(engine.find(" --recompute selective") != std::string::npos);
}
