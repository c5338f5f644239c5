// Stages that do not divide the layers (MODEL.md §9): the advisor's own
// partition, a pinned one, and a 70-layer model (BLOOM-176B's shape) on 12
// stages priced stage by stage.
#include <doctest/doctest.h>

#include "advisor/core/job.hpp"
#include "advisor/model/memory_model.hpp"
#include "advisor/model/prediction.hpp"
#include "advisor/output/launch.hpp"
#include "tests/helpers.hpp"

using namespace ff;

namespace {

ModelSpec bloom() {
  ModelSpec m;
  m.name = "bloom-176b";
  m.layers = 70, m.hidden = 14336, m.heads = 112, m.ffn = 4 * 14336, m.vocab = 250880, m.padded_vocab = 250880;
  m.seq_len = 2048;
  return m;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("stage blocks: equal runs where the stages divide the layers, else the head's stage lighter") {
  // The head in blocks, by hand: 2·H·Vp / (2·12H² + 4·S·H) per token
  // = 7,193,231,360 / 5,049,942,016 = 1.424. With b blocks on the last
  // stage the others hold ⌈(70 − b)/11⌉: b = 4 gives max(6, 5.42) = 6;
  // b = 5, max(6, 6.42); b = 3, max(7, 4.42).
  const ModelSpec m = bloom();
  CHECK(stage_blocks(m, 12) == std::vector<int>{6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 4});
  CHECK(stage_blocks(m, 10) == std::vector<int>(10, 7));  // 70 / 10: Megatron's equal runs
  CHECK(stage_blocks(m, 1) == std::vector<int>{70});
  // 16 stages: b = 1, 2 and 3 all give a most-loaded stage of 5 (⌈69/15⌉,
  // ⌈68/15⌉, ⌈67/15⌉ = 5, against b + 1.42), b = 4 gives 5.42; ties go to
  // the larger b, 3. The other 67 as 7 runs of 5 and 8 of 4, the larger first.
  std::vector<int> sixteen(7, 5);
  sixteen.insert(sixteen.end(), 8, 4);
  sixteen.push_back(3);
  CHECK(stage_blocks(m, 16) == sixteen);
  CHECK(stage_blocks(m, 3, {30, 30, 10}) == std::vector<int>{30, 30, 10});
  CHECK(stage_layers_problem(m, 3, {30, 30, 10}).empty());
  CHECK(contains(stage_layers_problem(m, 4, {30, 30, 10}), "3 stages' blocks given for 4 pipeline stages"));
  CHECK(contains(stage_layers_problem(m, 3, {30, 30, 11}), "add up to 71, not the model's 70 layers"));
  CHECK(contains(stage_layers_problem(m, 3, {40, 30, 0}), "at least one block"));
}

TEST_CASE("a 70-layer model on 12 stages: three kinds of stage, the last lighter, priced and launched") {
  Job job{bloom(), 384, 2048, Dtype::BF16};
  job.model.attention = Attention::Unfused;
  MachineProfile p = load_machine("perlmutter");
  p.hbm_capacity = 80.0 * (1LL << 30);  // BLOOM's A100s had 80 GB
  Grid g{1, 4, 1, 8};
  g.p = 12;
  CHECK(split_problem(job, g, 2).empty());
  const StageKinds k = distinct_stages(job, g);
  REQUIRE(k.count == 3);
  CHECK(k.stage[0].blocks == 6);
  CHECK(k.stage[1].blocks == 6);
  CHECK(k.copies[1] == 10);
  CHECK(k.stage[2].blocks == 4);
  CHECK(k.stage[2].first_block == 66);
  CHECK(k.kind_of(11) == 2);
  CHECK(k.each[5].first_block == 30);

  Config c;
  c.grid = g;
  c.micro_batch = 2;
  c.recompute = Recompute::Selective;
  c.sequence_parallel = true;
  const Prediction pr = predict(job, p, c);
  REQUIRE(pr.stage_memory.size() == 12);
  // Four blocks and the head against six blocks: less memory, less time per micro-batch.
  CHECK(pr.stage_memory[11].activations < pr.stage_memory[10].activations);
  CHECK(pr.per_kind[2].fwd_s + pr.per_kind[2].bwd_s < pr.per_kind[1].fwd_s + pr.per_kind[1].bwd_s);
  CHECK(pr.schedule.critical_stage != 11);
  // The closed form against the event simulation (MODEL.md §9).
  CHECK(pr.schedule.time_s == doctest::Approx(pr.simulated.time_s).epsilon(0.02).scale(0));

  // Megatron pins the first and last runs: 6 and 4, the middle 6 each.
  std::string mega;
  for (const LaunchLine& l : launch_lines(job, "bloom.json", p, c, 0))
    if (l.name == "megatron-axonn") mega = l.line;
  CHECK(contains(mega, " --pipeline-model-parallel-size 12"));
  CHECK(contains(mega, " --decoder-first-pipeline-num-layers 6 --decoder-last-pipeline-num-layers 4"));
  // A pinned partition whose middle runs differ is not Megatron's to say.
  job.stage_layers = {6, 6, 6, 6, 6, 11, 5, 5, 5, 5, 5, 4};
  for (const LaunchLine& l : launch_lines(job, "bloom.json", p, c, 0))
    if (l.name == "megatron-axonn") {
      CHECK(!contains(l.line, "--decoder-first"));
      CHECK(contains(l.note, "cannot pin"));
    }
    else if (l.name == "mpirun") CHECK(contains(l.line, " --stage-layers 6,6,6,6,6,11,5,5,5,5,5,4"));
  // Every stage is checked for memory when the runs do not shrink: stage 5's
  // 11 blocks with 12 − 5 = 7 micro-batches in flight (77 block-activations)
  // outweigh stage 0's 6 with 12 (72), and its weights the embedding and 6
  // blocks (a block is 12H²/4 = 617 M values per rank, the embedding
  // V_p·H/4 = 899 M). Stages 0, 1 and the last alone would miss it.
  const MemoryUse most = memory_use(job, p, g, 2, Recompute::Selective, Overlap{}, {}, true);
  const std::vector<MemoryUse> each = memory_by_stage(job, p, g, 2, Recompute::Selective, Overlap{}, {}, true);
  REQUIRE(each.size() == 12);
  for (const MemoryUse& u : each) CHECK(u.total() <= each[5].total());
  CHECK(most.total() == each[5].total());
}
