// The correctness contract (MODEL.md §6): in fp64, every ordered grid shape of
// 1, 2, 4 and 8 ranks, under several placements, micro-batch, recompute and
// overlap settings, ends with the loss of every step and every parameter
// (canonical layout) equal to grid 1,1,1,1 to 1e-10 relative; its bytes per
// axis equal MODEL.md §1's table, computed here independently of the engine.
// Run with 8 ranks: shapes of p ranks run 8/p at a time on split communicators.
#include <doctest/doctest.h>
#include <mpi.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "advisor/core/job.hpp"
#include "advisor/model/memory_model.hpp"
#include "engine/pipeline.hpp"
#include "engine/train.hpp"

using namespace ff;
using namespace ff::engine;

namespace {

ModelSpec exact_model() {
  // Divisible by every grid of up to 8 ranks: H, A, F, Vp by 8; every block by 8.
  ModelSpec m;
  m.name = "gpt-exact";
  m.layers = 2, m.hidden = 32, m.heads = 8, m.ffn = 128, m.vocab = 250, m.padded_vocab = 256, m.seq_len = 16;
  return m;
}

// A Llama-style block on the same grids: 16 query heads over 8 KV heads of
// 4 columns (A·d_h = 64 ≠ H = 32), SwiGLU, RMSNorm, RoPE, no biases;
// untied, or tied.
ModelSpec llama_exact_model(bool tied) {
  ModelSpec m = exact_model();
  m.name = tied ? "llama-exact-tied" : "llama-exact";
  m.heads = 16, m.kv_heads = 8, m.head_dim = 4, m.ffn = 64;
  m.mlp = Mlp::SwiGlu, m.norm = Norm::RmsNorm, m.positions = Positions::Rope;
  m.bias = m.qkv_bias = false;
  m.tied_embeddings = tied;
  return m;
}

// The models the suite holds to one rank, with `layers` blocks: GPT and the
// Llama-style block, and (`tied`) its tied variant where the tie changes
// what runs (every shape, stages and their exchange, offload's buckets).
std::vector<ModelSpec> exact_models(int layers = 2, bool tied = true) {
  std::vector<ModelSpec> all{exact_model(), llama_exact_model(false)};
  if (tied) all.push_back(llama_exact_model(true));
  for (ModelSpec& m : all) m.layers = layers;
  return all;
}

struct Variant {
  int order_pick;  // index into the grid's distinct placements (wrapped)
  int micro_batch;
  Recompute recompute;
  const char* overlap;
};
using R = Recompute;
const Variant kVariants[] = {
    {0, 1, R::None, "none"}, {1, 2, R::Full, "oar"}, {2, 1, R::Selective, "ors"}, {3, 2, R::None, "oag"},
    {4, 1, R::Full, "all"},
};
constexpr int kSteps = 3;
constexpr long kBatch = 16;

RunOptions options(const Grid& g, const Variant& v, const ModelSpec& m) {
  RunOptions o;
  o.model = m;
  o.config.grid = g;
  auto orders = distinct_orders(g);
  o.config.order = orders[size_t(v.order_pick) % orders.size()];
  o.config.micro_batch = v.micro_batch;
  o.config.recompute = v.recompute;
  o.config.overlap = parse_overlap(v.overlap);
  o.batch = kBatch;
  o.steps = kSteps;
  o.opt.lr = 1e-2;  // large enough that parameters move visibly in 3 steps
  return o;
}

// MODEL.md §1 and §12, elements per rank per step on each axis (X, Y, Z, D),
// written out from the tables rather than taken from the engine's accounting.
PerAxis<double> expected_elements(const ModelSpec& m, const RunOptions& o) {
  const Grid& g = o.config.grid;
  const double L = m.layers, H = m.hidden, F = m.ffn, Vp = m.padded_vocab, S = m.seq_len;
  const double dh = m.head_size(), Aq = m.heads * dh, Akv = m.kv_head_count() * dh;
  const bool swiglu = m.mlp == Mlp::SwiGlu, rms = m.norm == Norm::RmsNorm;
  const double t = double(o.config.micro_batch) * S, r = o.config.recompute == Recompute::Full ? 1 : 0;
  // Sequence parallel (MODEL.md §13): the norms see t/G_y tokens; each Y
  // all-reduce into the split region becomes a reduce-scatter, and each way
  // out of it an all-gather (a normal layer's input forward and again for
  // its weight gradient, a transposed layer's and the embedding's output
  // gradient), every one counted at the full t·H/G_x.
  const bool sp = o.config.sequence_parallel;
  const double ts = sp ? t / g.y : t;
  const double micro = double(o.batch) / (double(o.config.micro_batch) * g.z * g.d);
  PerAxis<double> per_micro{}, per_step{};
  const int X = int(Axis::X), Y = int(Axis::Y), Z = int(Axis::Z), D = int(Axis::D);
  struct Lin { double k, n; bool transposed; };
  for (Lin l : {Lin{H, Aq + 2 * Akv, false}, Lin{Aq, H, true}, Lin{H, (swiglu ? 2 : 1) * F, false}, Lin{F, H, true}}) {
    double cell = l.k * l.n / (g.x * g.y);
    per_micro[Z] += L * ((1 + r) + 1 + 1) * cell;  // gathers: forward (again under recompute), backward; reduce-scatter
    if (!l.transposed) {
      per_micro[X] += L * (1 + r) * t * l.n / g.y;  // output partial sums
      per_micro[Y] += L * t * l.k / g.x;            // input-gradient partial sums
      if (sp) per_micro[Y] += L * ((1 + r) + 1) * t * l.k / g.x;  // input gathered forward, and for the weight gradient
    } else {
      per_micro[Y] += L * (1 + r) * t * l.n / g.x;
      if (sp) per_micro[Y] += L * t * l.n / g.x;  // output gradient gathered
      per_micro[X] += L * t * l.k / g.y;
    }
    per_step[D] += L * cell / g.z;
  }
  // Two norms per block and the final one. LayerNorm: sum, then centred
  // squares forward (t each); backward 2t. RMSNorm: t each way.
  const double norm_fwd = rms ? ts : 2 * ts, norm_bwd = rms ? ts : 2 * ts;
  per_micro[X] += L * 2 * ((1 + r) * norm_fwd + norm_bwd) + norm_fwd + norm_bwd;
  const double emb = Vp * H / (g.x * g.y), head = H * Vp / (g.x * g.y);
  per_micro[Z] += emb + emb;              // embedding: gather, reduce-scatter
  per_micro[Y] += (sp ? 2 : 1) * t * H / g.x;  // lookup partial rows (and, sp, its gradient gathered)
  per_micro[Z] += 3 * head;               // LM head (tied: the embedding's block): gather forward and backward, reduce-scatter
  per_micro[X] += t * Vp / g.y;           // logits partial sums
  per_micro[Y] += (sp ? 3 : 1) * t * H / g.x + t + 2 * t;  // head input gradient (sp: and input gathered twice); cross-entropy
  per_step[D] += (m.tied_embeddings ? emb : emb + head) / g.z;
  const double hx = H / g.x, norm_vectors = rms ? 1 : 2;  // γ, and LayerNorm's β
  double per_block = 2 * norm_vectors * hx;
  if (m.qkv_bias) per_block += (Aq + 2 * Akv) / g.y;
  if (m.bias) per_block += hx + (swiglu ? 2 : 1) * F / g.y + hx;  // attention-out, MLP in, MLP out
  const double positions = m.positions == Positions::Learned ? S * hx : 0;
  const double replicated = L * per_block + norm_vectors * hx + positions;
  per_step[Z] += replicated;
  per_step[D] += replicated;
  if (sp) per_step[Y] += (2 * L + 1) * norm_vectors * hx;  // the norms' weight gradients, summed over Y
  PerAxis<double> total{};
  for (Axis a : kAxes) {
    const int i = int(a);
    total[i] = g.size(a) > 1 ? micro * per_micro[i] + per_step[i] : 0.0;
  }
  return total;
}

struct Outcome {
  double valid = 0;
  double shape = 0, variant = 0;
  double loss_err = 0;    // max over steps, relative
  double param_err = 0;   // max over tensors of max|Δ| / max|reference|
  double bytes_err = 0;   // max over axes, relative
  double worst_tensor = -1;
};

double rel(double a, double b) { return std::abs(a - b) / std::max(std::abs(b), 1e-300); }

Outcome compare(const RunResult& ref, const RunResult& run, const PerAxis<double>& bytes) {
  Outcome o;
  o.valid = 1;
  for (size_t s = 0; s < ref.steps.size(); ++s) o.loss_err = std::max(o.loss_err, rel(run.steps[s].loss, ref.steps[s].loss));
  for (size_t i = 0; i < ref.parameters.size(); ++i) {
    const auto& a = run.parameters[i].second;
    const auto& b = ref.parameters[i].second;
    double diff = 0, scale = 0;
    for (size_t j = 0; j < b.size(); ++j) {
      diff = std::max(diff, std::abs(a[j] - b[j]));
      scale = std::max(scale, std::abs(b[j]));
    }
    double e = diff / std::max(scale, 1e-300);
    if (e > o.param_err) o.param_err = e, o.worst_tensor = double(i);
  }
  for (int a = 0; a < kAxisCount; ++a) {
    double got = run.bytes_per_step[a], want = bytes[a];
    o.bytes_err = std::max(o.bytes_err, want == 0 ? got : rel(got, want));
  }
  return o;
}

// Runs `jobs` (grid, variant) of p ranks each, 8/p at a time, and returns
// every outcome on world rank 0.
// Besides the variant: the device, and the data-parallel flags of MODEL.md
// §10 (ODP's buckets small enough that every run has several).
// Offload: buckets of 256 elements in chunks of 2, so that every run has
// several of each; `clip` 0 runs each chunk's optimizer under the chunks
// still in flight.
struct Extra {
  std::string device = "cpu";
  bool odp = false, shard_optimizer = false, offload = false;
  double clip = 1.0;
  std::vector<int> stage_layers;  // pinned; empty: the advisor's partition
  bool sequence_parallel = false;
  int virtual_stages = 1;         // interleaved model chunks per stage
};

std::vector<Outcome> run_all(const std::vector<std::pair<Grid, int>>& jobs, int p, const ModelSpec& m,
                             const RunResult& ref, const Extra& extra = {}) {
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int teams = size / p, team = rank / p;
  MPI_Comm sub;
  MPI_Comm_split(MPI_COMM_WORLD, team, rank, &sub);
  int sub_rank = 0;
  MPI_Comm_rank(sub, &sub_rank);
  std::vector<Outcome> all;
  for (size_t round = 0; round * teams < jobs.size(); ++round) {
    size_t j = round * teams + team;
    Outcome mine;
    if (j < jobs.size()) {
      RunOptions o = options(jobs[j].first, kVariants[jobs[j].second], m);
      o.device = extra.device;
      o.config.overlap.odp = extra.odp;
      o.config.shard_optimizer = extra.shard_optimizer;
      o.buckets.dp_bytes = 4096;
      o.config.offload = extra.offload;
      o.buckets.offload_elements = 256;
      o.buckets.offload_chunk = 2;
      o.opt.clip = extra.clip;
      o.stage_layers = extra.stage_layers;
      o.config.sequence_parallel = extra.sequence_parallel;
      o.config.virtual_stages = extra.virtual_stages;
      // A pace far above the host's: exactness, not timing, is under test.
      o.pace = DevicePace{1e12, 1e12, 20e-6, 1e12};
      RunResult r = train<double>(sub, o, true);
      if (sub_rank == 0) {
        auto want = expected_elements(m, o);
        for (double& w : want) w *= sizeof(double);
        mine = compare(ref, r, want);
        mine.shape = double(j);
        mine.variant = jobs[j].second;
      }
    }
    std::vector<Outcome> got(rank == 0 ? size : 0);
    MPI_Gather(&mine, sizeof(Outcome) / sizeof(double), MPI_DOUBLE, got.data(), sizeof(Outcome) / sizeof(double),
               MPI_DOUBLE, 0, MPI_COMM_WORLD);
    for (const Outcome& o : got)
      if (o.valid) all.push_back(o);
  }
  MPI_Comm_free(&sub);
  return all;
}

RunResult reference(const ModelSpec& m, double clip = 1.0) {
  RunOptions o = options(Grid{}, kVariants[0], m);
  o.opt.clip = clip;
  return train<double>(MPI_COMM_SELF, o, true);
}

std::string describe(const std::vector<std::pair<Grid, int>>& jobs, const Outcome& o, const ModelSpec& m) {
  const auto& [g, v] = jobs[size_t(o.shape)];
  RunOptions opt = options(g, kVariants[v], m);
  return "grid " + g.str() + " order " + opt.config.order.str() + " micro_batch " +
         std::to_string(opt.config.micro_batch) + " recompute " + recompute_name(opt.config.recompute) + " overlap " +
         opt.config.overlap.str();
}

// Rank 0's check of every job against one rank: the loss of every step and
// every parameter within 1e-10; the bytes per axis too where
// expected_elements describes the run (`bytes`). Returns the runs checked.
int check_exact(const std::vector<std::pair<Grid, int>>& jobs, const std::vector<Outcome>& out, const ModelSpec& m,
                const std::string& what, bool bytes) {
  CHECK(out.size() == jobs.size());
  for (const Outcome& o : out) {
    INFO(describe(jobs, o, m) << what);
    CHECK(o.loss_err < 1e-10);
    CHECK(o.param_err < 1e-10);
    if (bytes) CHECK(o.bytes_err == 0);
  }
  return int(out.size());
}

}  // namespace

TEST_CASE("every grid shape of 1, 2, 4 and 8 ranks trains exactly like one rank (fp64)") {
  for (const ModelSpec& m : exact_models()) {
  const RunResult ref = reference(m);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int shapes = 0, runs = 0;
  double worst_loss = 0, worst_param = 0;
  for (int p : {1, 2, 4, 8}) {
    std::vector<std::pair<Grid, int>> jobs;
    std::vector<Grid> grids = factorizations(p);
    shapes += int(grids.size());
    for (size_t i = 0; i < grids.size(); ++i) {
      // Two settings per shape, rotating through placements, micro-batch,
      // recompute and each overlap flag.
      jobs.push_back({grids[i], int(i % 5)});
      jobs.push_back({grids[i], int((i + 2) % 5)});
      // Shapes with Z and one of X, Y split get every overlap setting.
      if (grids[i].z > 1 && (grids[i].x > 1 || grids[i].y > 1))
        for (int v : {1, 3, 4}) jobs.push_back({grids[i], v});
    }
    std::vector<Outcome> out = run_all(jobs, p, m, ref);
    if (rank != 0) continue;
    CHECK(out.size() == jobs.size());
    for (const Outcome& o : out) {
      INFO(m.name << " " << describe(jobs, o, m));
      INFO("worst tensor: " << (o.worst_tensor >= 0 ? ref.parameters[size_t(o.worst_tensor)].first : "-"));
      CHECK(o.loss_err < 1e-10);
      CHECK(o.param_err < 1e-10);
      CHECK(o.bytes_err == 0);
      worst_loss = std::max(worst_loss, o.loss_err);
      worst_param = std::max(worst_param, o.param_err);
    }
    runs += int(out.size());
  }
  if (rank == 0) {
    CHECK(shapes == 35);
    MESSAGE(m.name << ": grid shapes: " << shapes << ", runs compared: " << runs << ", worst relative error: loss "
                   << worst_loss << ", parameters " << worst_param);
  }
  }
}

// The models' attention is flash (their default): every run above tiles it.
// Here it is held against the unfused attention, on sequences of 80 tokens
// (a full tile and a tail, so tiles above the diagonal are skipped and the
// online softmax rescales): one rank of each model, then every 8-rank shape
// against that unfused run.
TEST_CASE("flash attention trains like the unfused one: one rank, and every 8-rank shape, on 80-token sequences (fp64)") {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  for (ModelSpec m : exact_models()) {
    m.seq_len = 80;
    ModelSpec unfused = m;
    unfused.attention = Attention::Unfused;
    const RunResult ref = reference(unfused);
    if (rank == 0) {
      const Outcome one = compare(ref, reference(m), PerAxis<double>{});
      INFO(m.name << ": one rank, flash against unfused");
      CHECK(one.loss_err < 1e-10);
      CHECK(one.param_err < 1e-10);
    }
    std::vector<std::pair<Grid, int>> jobs;
    const std::vector<Grid> grids = factorizations(8);
    for (size_t i = 0; i < grids.size(); ++i) jobs.push_back({grids[i], int(i % 5)});
    const std::vector<Outcome> out = run_all(jobs, 8, m, ref);
    if (rank == 0) check_exact(jobs, out, m, " (flash against one unfused rank, 80 tokens)", true);
  }
}

TEST_CASE("the paced device runs the same schedule: every 8-rank shape with all overlap flags, exact (fp64)") {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  for (const ModelSpec& m : exact_models(2, false)) {
    const RunResult ref = reference(m);
    std::vector<std::pair<Grid, int>> jobs;
    for (const Grid& g : factorizations(8)) jobs.push_back({g, 4});
    std::vector<Outcome> out = run_all(jobs, 8, m, ref, Extra{"paced"});
    if (rank == 0) check_exact(jobs, out, m, " " + m.name + " on the paced device", true);
  }
}

TEST_CASE("bucketed data-parallel gradients (odp) and a sharded optimizer: every shape with G_d > 1, exact (fp64)") {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int runs = 0;
  for (const ModelSpec& m : exact_models(2, false)) {
  const RunResult ref = reference(m);
  for (int p : {2, 4, 8}) {
    std::vector<std::pair<Grid, int>> jobs;
    for (const Grid& g : factorizations(p))
      if (g.d > 1) jobs.push_back({g, 4});  // every overlap flag, recompute, micro-batch 1
    for (Extra e : {Extra{"cpu", true, false}, Extra{"cpu", false, true}, Extra{"cpu", true, true}}) {
      std::vector<Outcome> out = run_all(jobs, p, m, ref, e);
      // (Bytes: the sharded all-gather is outside expected_elements; engine-cli
      // holds them against advisor predict.)
      if (rank == 0)
        runs += check_exact(jobs, out, m, " " + m.name + (e.odp ? " odp" : "") + (e.shard_optimizer ? " sharded" : ""),
                            false);
    }
  }
  }
  if (rank == 0) MESSAGE("odp / sharded optimizer runs compared: " << runs);
}

TEST_CASE("pipeline stages: every shape of 2, 4 and 8 ranks with P in {2, 4} trains exactly like one rank (fp64)") {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int runs = 0;
  for (const ModelSpec& m : exact_models(4)) {  // whole blocks on each of up to 4 stages
  const RunResult ref = reference(m);
  for (int n : {2, 4, 8}) {
    std::vector<std::pair<Grid, int>> jobs;
    for (int P : {2, 4}) {
      if (P > n) continue;
      std::vector<Grid> grids = factorizations(n / P);
      for (size_t i = 0; i < grids.size(); ++i) {
        Grid g = grids[i];
        g.p = P;
        // Two settings per shape, rotating through placements (the five-
        // letter orders put P anywhere), micro-batch, recompute and each
        // overlap flag; stages without tensor axes run in arrival order.
        jobs.push_back({g, int(i % 5)});
        jobs.push_back({g, int((i + 2) % 5)});
      }
    }
    for (Extra e : {Extra{}, Extra{"cpu", true, true}}) {
      std::vector<Outcome> out = run_all(jobs, n, m, ref, e);
      // (Bytes: per stage against advisor predict in engine-cli.)
      if (rank == 0)
        runs += check_exact(jobs, out, m, " " + m.name + (e.odp ? " pipelined, odp, sharded" : " pipelined"), false);
    }
  }
  }
  if (rank == 0) MESSAGE("pipelined runs compared: " << runs);
}

TEST_CASE("uneven stages: 5 blocks on 2 and 4 stages, the advisor's partition and a pinned one, exact (fp64)") {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int runs = 0;
  for (const ModelSpec& m : exact_models(5, false)) {
    const RunResult ref = reference(m);
    // stage_blocks: 3,2 on two stages and 2,1,1,1 on four (the head's stage
    // lighter); pinned, 1,4 (the last stage heavier).
    CHECK(stage_blocks(m, 2) == std::vector<int>{3, 2});
    CHECK(stage_blocks(m, 4) == std::vector<int>{2, 1, 1, 1});
    for (const std::vector<int>& pin : {std::vector<int>{}, std::vector<int>{1, 4}})
      for (int n : {2, 4, 8}) {
        std::vector<std::pair<Grid, int>> jobs;
        for (int P : {2, 4}) {
          if (P > n || (!pin.empty() && P != int(pin.size()))) continue;
          std::vector<Grid> grids = factorizations(n / P);
          for (size_t i = 0; i < grids.size(); ++i) {
            Grid g = grids[i];
            g.p = P;
            jobs.push_back({g, int(i % 5)});
          }
        }
        std::vector<Outcome> out = run_all(jobs, n, m, ref, Extra{"cpu", false, false, false, 1.0, pin});
        if (rank == 0)
          runs += check_exact(jobs, out, m, " " + m.name + " uneven" + (pin.empty() ? "" : ", pinned 1,4"), false);
      }
  }
  if (rank == 0) MESSAGE("uneven-stage runs compared: " << runs);
}

TEST_CASE("sequence parallelism: every shape with G_y > 1, with stages, odp and a sharded optimizer, exact (fp64)") {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int runs = 0;
  for (const ModelSpec& m : exact_models()) {
    const RunResult ref = reference(m);
    for (int n : {2, 4, 8}) {
      // Without stages, each shape in two settings (placement, micro-batch,
      // recompute, overlap flag rotating); bytes against MODEL.md's tables.
      std::vector<std::pair<Grid, int>> flat, staged, data;
      for (const Grid& g : factorizations(n))
        if (g.y > 1) {
          flat.push_back({g, int(flat.size() % 5)});
          flat.push_back({g, int((flat.size() + 1) % 5)});
          if (g.d > 1) data.push_back({g, int(data.size() % 5)});
        }
      if (n > 2)
        for (Grid g : factorizations(n / 2))
          if (g.y > 1) g.p = 2, staged.push_back({g, int(staged.size() % 5)});
      Extra e;
      e.sequence_parallel = true;
      std::vector<Outcome> out = run_all(flat, n, m, ref, e);
      if (rank == 0) runs += check_exact(flat, out, m, " " + m.name + " sequence parallel", true);
      out = run_all(staged, n, m, ref, e);
      if (rank == 0) runs += check_exact(staged, out, m, " " + m.name + " sequence parallel, 2 stages", false);
      e.odp = e.shard_optimizer = true;
      out = run_all(data, n, m, ref, e);
      if (rank == 0) runs += check_exact(data, out, m, " " + m.name + " sequence parallel, odp, sharded", false);
    }
  }
  if (rank == 0) MESSAGE("sequence-parallel runs compared: " << runs);
}

// Worst relative errors of the interleaved runs, for the closing message.
double interleaved_worst(const std::vector<Outcome>& out, double& loss) {
  double param = 0;
  for (const Outcome& o : out) loss = std::max(loss, o.loss_err), param = std::max(param, o.param_err);
  return param;
}

TEST_CASE("interleaved stages: (P, v) in {(2, 2), (2, 3), (4, 2)} on every shape of 2, 4 and 8 ranks, with sequence parallelism where G_y > 1, exact (fp64)") {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int runs = 0;
  double worst_loss = 0, worst_param = 0;
  for (auto [P, v] : {std::pair{2, 2}, std::pair{2, 3}, std::pair{4, 2}})
    for (const ModelSpec& m : exact_models(P * v)) {  // one block a chunk
      const RunResult ref = reference(m);
      for (int n : {2, 4, 8}) {
        if (P > n) continue;
        std::vector<std::pair<Grid, int>> jobs, data_jobs, sp_jobs;
        std::vector<Grid> grids = factorizations(n / P);
        for (size_t i = 0; i < grids.size(); ++i) {
          Grid g = grids[i];
          g.p = P;
          // One setting per shape, rotating through placements, micro-batch
          // (M = P, every forward first, where micro_batch·G_z·G_d = 4 for
          // P = 4), recompute and each overlap flag.
          jobs.push_back({g, int((i + size_t(v)) % 5)});
          if (g.d > 1) data_jobs.push_back({g, 4});
          if (g.y > 1) sp_jobs.push_back({g, int((i + 2) % 5)});
        }
        Extra plain;
        plain.virtual_stages = v;
        Extra sharded{"cpu", true, true};  // odp and the sharded optimizer
        sharded.virtual_stages = v;
        Extra sp = plain;  // sequence parallel: split messages between the chunks
        sp.sequence_parallel = true;
        for (const auto& [e, js] : {std::pair{plain, jobs}, std::pair{sharded, data_jobs}, std::pair{sp, sp_jobs}}) {
          if (js.empty()) continue;
          std::vector<Outcome> out = run_all(js, n, m, ref, e);
          if (rank != 0) continue;
          runs += check_exact(js, out, m,
                              " " + m.name + " P " + std::to_string(P) + " v " + std::to_string(v) +
                                  (e.odp ? ", odp, sharded" : "") + (e.sequence_parallel ? ", sequence parallel" : ""),
                              false);
          worst_param = std::max(worst_param, interleaved_worst(out, worst_loss));
        }
      }
    }
  if (rank == 0)
    MESSAGE("interleaved runs compared: " << runs << ", worst relative error: loss " << worst_loss << ", parameters "
                                          << worst_param);
}

TEST_CASE("interleaved: the engine's activation slots are the chunks the advisor's memory model keeps in flight") {
  for (int P : {2, 3, 4})
    for (int v : {2, 3})
      for (long M : {long(P), 2L * P, 4L * P}) {
        Grid g;
        g.p = P;
        for (int s = 0; s < P; ++s) {
          INFO("P " << P << " v " << v << " M " << M << " stage " << s);
          CHECK(double(interleaved_slots(P, s, v, M)) == in_flight(g, M, s, v) * v);
          // Every (chunk, micro-batch) once forward, once backward, each
          // chunk's micro-batches in order.
          const std::vector<ChunkOp> ops = interleaved_order(P, s, v, M);
          CHECK(ops.size() == size_t(2 * M * v));
          std::vector<long> next_f(size_t(v), 0), next_b(size_t(v), 0);
          for (const ChunkOp& op : ops) CHECK(op.micro == (op.forward ? next_f : next_b)[size_t(op.chunk)]++);
        }
      }
}

TEST_CASE("interleaved stages on the paced device and with offload: 8-rank shapes with P = 2, v = 2, exact (fp64)") {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int runs = 0;
  double worst_loss = 0, worst_param = 0;
  for (const ModelSpec& m : exact_models(4, false)) {
    const RunResult ref = reference(m);
    std::vector<std::pair<Grid, int>> jobs;
    for (Grid g : factorizations(4)) {
      g.p = 2;
      jobs.push_back({g, int(jobs.size() % 5)});
    }
    Extra paced{"paced"}, offload{"cpu", false, false, true};
    paced.virtual_stages = offload.virtual_stages = 2;
    for (const Extra& e : {paced, offload}) {
      std::vector<Outcome> out = run_all(jobs, 8, m, ref, e);
      if (rank != 0) continue;
      runs += check_exact(jobs, out, m, " " + m.name + " P 2 v 2 " + (e.offload ? "offload" : "paced"), false);
      worst_param = std::max(worst_param, interleaved_worst(out, worst_loss));
    }
  }
  if (rank == 0)
    MESSAGE("interleaved paced and offloaded runs compared: " << runs << ", worst relative error: loss " << worst_loss
                                                              << ", parameters " << worst_param);
}

TEST_CASE("offload: every shape with G_d > 1, and pipelined ones, with and without clipping, exact (fp64)") {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int runs = 0;
  for (const ModelSpec& m : exact_models(4)) {  // whole blocks on each of up to 4 stages
  for (double clip : {1.0, 0.0}) {
    const RunResult ref = reference(m, clip);
    for (int n : {2, 4, 8}) {
      std::vector<std::pair<Grid, int>> jobs;
      for (const Grid& g : factorizations(n))
        if (g.d > 1) jobs.push_back({g, int(jobs.size() % 5)});
      for (int P : {2, 4}) {
        if (P > n) continue;
        for (Grid g : factorizations(n / P)) {
          g.p = P;
          jobs.push_back({g, int(jobs.size() % 5)});
        }
      }
      Extra e{"cpu", clip == 0.0, false, true, clip};  // without clipping, ODP posts the chunks during backward
      std::vector<Outcome> out = run_all(jobs, n, m, ref, e);
      if (rank == 0)
        runs += check_exact(jobs, out, m, " " + m.name + (clip > 0 ? " offload" : " offload, odp, no clipping"), false);
    }
  }
  }
  if (rank == 0) MESSAGE("offloaded runs compared: " << runs);
}

TEST_CASE("parameters move: the comparison above is not between untrained models") {
  const ModelSpec m = exact_model();
  RunOptions o = options(Grid{}, kVariants[0], m);
  o.steps = 1;
  RunResult start = train<double>(MPI_COMM_SELF, [&] { auto z = o; z.opt.lr = 1e-30; return z; }(), true);
  RunResult moved = train<double>(MPI_COMM_SELF, o, true);
  double max_change = 0;
  for (size_t i = 0; i < start.parameters.size(); ++i)
    for (size_t j = 0; j < start.parameters[i].second.size(); ++j)
      max_change = std::max(max_change, std::abs(start.parameters[i].second[j] - moved.parameters[i].second[j]));
  CHECK(max_change > 1e-3);  // AdamW's first step moves each weight by about lr = 1e-2
}

// fp32: the loss of every step of each grid (all 8 ranks, every overlap
// flag) against one rank, within `tolerance` relative.
static void check_fp32_losses(const ModelSpec& m, const std::vector<Grid>& grids, double tolerance,
                              bool sequence_parallel = false) {
  RunResult ref = train<float>(MPI_COMM_SELF, options(Grid{}, kVariants[0], m), false);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  for (const Grid& g : grids) {
    RunOptions o = options(g, kVariants[4], m);
    o.config.sequence_parallel = sequence_parallel;
    RunResult r = train<float>(MPI_COMM_WORLD, o, false);
    if (rank != 0) continue;
    for (size_t s = 0; s < ref.steps.size(); ++s) {
      INFO(m.name << " grid " << g.label() << " step " << s);
      CHECK(rel(r.steps[s].loss, ref.steps[s].loss) < tolerance);
    }
  }
}

TEST_CASE("fp32, pipelined: the loss of every 8-rank shape with P in {2, 4} agrees with one rank to 1e-4 relative") {
  std::vector<Grid> grids;
  for (int P : {2, 4})
    for (Grid g : factorizations(8 / P)) {
      g.p = P;
      grids.push_back(g);
    }
  for (const ModelSpec& m : exact_models(4, false)) check_fp32_losses(m, grids, 1e-4);
}

TEST_CASE("fp32: the loss of every 8-rank shape agrees with one rank to 1e-5 relative") {
  for (const ModelSpec& m : exact_models(2, false)) check_fp32_losses(m, factorizations(8), 1e-5);
}

TEST_CASE("fp32, sequence parallel: the loss of every 8-rank shape with G_y > 1 agrees with one rank to 1e-5 relative") {
  std::vector<Grid> grids;
  for (const Grid& g : factorizations(8))
    if (g.y > 1) grids.push_back(g);
  for (const ModelSpec& m : exact_models(2, false)) check_fp32_losses(m, grids, 1e-5, true);
}
