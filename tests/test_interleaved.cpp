// Megatron's interleaved 1F1B (MODEL.md §9): v model chunks per stage. The
// closed form against the event simulation of Megatron's order, the bubble
// by hand (Narayanan et al. 2021: (P − 1)/(v·M) of the ideal), the rules,
// the activations in flight, and what predict, the search and the launch
// lines make of it.
#include <doctest/doctest.h>

#include "advisor/core/job.hpp"
#include "advisor/model/memory_model.hpp"
#include "advisor/model/pipeline_model.hpp"
#include "advisor/model/prediction.hpp"
#include "advisor/model/search.hpp"
#include "advisor/output/launch.hpp"
#include "tests/helpers.hpp"

using namespace ff;
using fftest::rel;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

Job toy_job(int layers, long long gpus, long long batch) {
  Job j;
  j.model = fftest::toy_model(layers);
  j.gpus = gpus;
  j.batch = batch;
  return j;
}

}  // namespace

TEST_CASE("interleaved: P = 4, v = 2, M = 8 idles 3/16 of the ideal, closed form and event by event") {
  // Equal stages, f = 1 and b = 2 per micro-batch (chunks of 1/2 and 1),
  // messages free: the ideal is M·(f + b) = 24, the bubble (P − 1)/v·(f + b) = 4.5.
  const std::vector<StageTime> stages(4, StageTime{1, 2, 0});
  const Schedule closed = flush_schedule(stages, 8, 0.0, 2);
  const Schedule events = simulate_interleaved(stages, 8, 0.0, 2);
  CHECK(closed.time_s == rel(24 + 4.5));
  CHECK(events.time_s == rel(24 + 4.5));
  CHECK((closed.time_s - 24) / 24 == rel(3.0 / 16));
  // Without interleaving the bubble is (P − 1)·(f + b) = 9: twice as much.
  CHECK(flush_schedule(stages, 8, 0.0).time_s == rel(24 + 9));
  CHECK(simulate_schedule(stages, 8, 0.0, true).time_s == rel(24 + 9));
  // v = 4: (P − 1)/4 of a micro-batch, 2.25.
  CHECK(flush_schedule(stages, 8, 0.0, 4).time_s == rel(24 + 2.25));
  CHECK(simulate_interleaved(stages, 8, 0.0, 4).time_s == rel(24 + 2.25));
  // With messages and unequal stages the closed form stays near the events.
  const std::vector<StageTime> uneven{{1.0, 2.0, 0.3}, {1.2, 2.3, 0.2}, {1.1, 2.1, 0.2}, {1.4, 2.6, 0.4}};
  for (double t : {0.0, 0.05, 0.2}) {
    CAPTURE(t);
    const double c = flush_schedule(uneven, 16, t, 2).time_s, e = simulate_interleaved(uneven, 16, t, 2).time_s;
    CHECK(c == doctest::Approx(e).epsilon(0.05).scale(0));
  }
}

TEST_CASE("interleaved: Megatron's rules, and the activations its warm-up keeps") {
  Job job = toy_job(8, 8, 16);  // L = 8
  Grid g{1, 1, 1, 2};
  g.p = 4;  // M = 16 / (1·1·2) = 8
  CHECK(virtual_stages_problem(job, g, 1, 2).empty());
  CHECK(contains(virtual_stages_problem(job, g, 1, 4), "layers 8 are not divisible by G_pipe·v = 16"));
  CHECK(contains(virtual_stages_problem(job, g, 4, 2), "2 micro-batches per pipeline are not a multiple of G_pipe = 4"));
  CHECK(contains(virtual_stages_problem(job, Grid{1, 1, 1, 8}, 1, 2), "the grid has none"));
  Job pinned = job;
  pinned.stage_layers = {2, 2, 2, 2};
  CHECK(contains(virtual_stages_problem(pinned, g, 1, 2), "--stage-layers"));
  // Stage i holds min(M·v, 2(P − i − 1) + (v − 1)·P + 1) chunks of half its
  // blocks: stage 0, 11 halves (5.5 micro-batches, against 4 without);
  // the last, (0 + 4 + 1)/2.
  CHECK(in_flight(g, 8, 0, 2) == 5.5);
  CHECK(in_flight(g, 8, 3, 2) == 2.5);
  CHECK(in_flight(g, 8, 0) == 4);
  // M = P: Megatron runs every forward first, so every stage holds all M·v
  // chunks (the engine's schedule, engine/pipeline.cpp, does the same).
  CHECK(in_flight(g, 4, 0, 2) == 4);
  CHECK(in_flight(g, 4, 3, 2) == 4);
  const MachineProfile p = fftest::toy_machine(8);
  CHECK(memory_use(job, p, g, 1, Recompute::None, Overlap{}, {}, false, nullptr, 2).activations >
        memory_use(job, p, g, 1, Recompute::None, Overlap{}, {}, false, nullptr, 1).activations);
}

TEST_CASE("interleaved: predicted, searched and launched") {
  const Job job = toy_job(8, 8, 16);
  const MachineProfile p = fftest::toy_machine(8);
  Config c;
  c.grid = Grid{1, 1, 1, 2};
  c.grid.p = 4;
  c.dtype = job.dtype;
  const Prediction plain = predict(job, p, c);
  c.virtual_stages = 2;
  const Prediction inter = predict(job, p, c);
  CHECK(inter.static_order);
  // The closed form against the event simulation. The toy's 5 µs messages
  // weigh against its small chunks, so the fill's P·v − 1 crossings count:
  // priced as P − 1 crossings, the closed form came out 8.7% fast.
  CHECK(inter.simulated.time_s == doctest::Approx(inter.schedule.time_s).epsilon(0.05).scale(0));
  // Twice the messages: every chunk boundary is a stage boundary.
  CHECK(inter.estimate.comm_s[int(Axis::P)] == rel(2 * plain.estimate.comm_s[int(Axis::P)]));
  c.micro_batch = 4;  // M = 2: not a multiple of P
  CHECK_THROWS_AS(predict(job, p, c), InputError);
  c.micro_batch = 1;

  std::string mega, engine, note;
  for (const LaunchLine& l : launch_lines(job, "toy.json", p, c, 0)) {
    if (l.name == "megatron-axonn") mega = l.line;
    if (l.name == "mpirun") engine = l.line, note = l.note;
  }
  CHECK(contains(mega, " --num-layers-per-virtual-pipeline-stage 1"));  // 8 / (4·2)
  CHECK(contains(engine, " --virtual-stages 2"));  // the engine runs it (on the cpu and paced devices)
  CHECK(!contains(note, "interleaved"));

  SearchOptions opt;
  opt.virtual_stages = {2};
  opt.pipelines = {4};
  opt.micro_batches = {1};  // M = 8 or 16: multiples of P (where not, the search falls back to v = 1)
  const SearchResult r = search(job, p, opt);
  REQUIRE(!r.top.empty());
  for (const Ranked& x : r.top) CHECK(x.config.virtual_stages == 2);
}
