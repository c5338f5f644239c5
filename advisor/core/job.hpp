#pragma once
// A training job (model, GPUs, batch, dtype) and how a grid lays it out.
#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include "advisor/core/config.hpp"
#include "advisor/core/fusion.hpp"
#include "advisor/core/model_spec.hpp"

namespace ff {

struct Job {
  ModelSpec model;
  long long gpus = 0;
  long long batch = 0;  // sequences per iteration
  Dtype dtype = Dtype::BF16;
  Fusion fusion = Fusion::Fused;  // the framework that runs it (MODEL.md §2, "Kernels")
  // The gradient accumulator's and the data-parallel reduction's element:
  // fp32 (Megatron's default) or the training dtype (AxoNN's fp16; MODEL.md §13).
  Dtype grad_dtype = Dtype::FP32;
  // The blocks of each pipeline stage, pinned (--stage-layers, Megatron's
  // --decoder-first/last-pipeline-num-layers); empty: stage_blocks' own.
  std::vector<int> stage_layers{};
  // The runtime waits on each stage message it sends (Megatron's 1F1B,
  // DeepSpeed's pipeline engine) rather than posting it and computing on
  // (AxoNN, this project's engine): each costs its sender on every
  // micro-batch (MODEL.md §9).
  bool blocking_messages = false;
};

// Why `grid` cannot split this job with micro-batch `mb`, or "" when it can.
std::string split_problem(const Job& job, const Grid& grid, int micro_batch);

// Why engine/ cannot lay `m` out on `grid`, or "". Stricter than
// split_problem: the engine stores Z shards unpadded, so every weight's grid
// block (embedding Vp×H and the transposed layers split (Y, X), the others
// (X, Y)) must divide by G_z. `advisor validate` filters with it so it never
// launches a run the engine would refuse.
std::string engine_split_problem(const ModelSpec& m, const Grid& grid);
// Why engine/ cannot run `m` on any grid (a Llama-style block, MODEL.md §12), or "".
std::string engine_model_problem(const ModelSpec& m);

// How P pipeline stages split the L blocks (MODEL.md §9): `pinned` where
// given; L/P each where P divides L (Megatron's rule); otherwise balanced by
// FLOPs, the LM head's counted on the last stage (which so takes fewer
// blocks), the rest spread evenly with the larger runs first.
std::vector<int> stage_blocks(const ModelSpec& m, int stages, const std::vector<int>& pinned = {});
// Whether backward recomputes the attention core alone (MODEL.md §13):
// selective recompute where attention is unfused. With flash attention there
// is no S×S to drop and its backward recomputes the scores already, so
// selective keeps and costs what none does.
inline bool recomputes_attention_core(Recompute r, const ModelSpec& m) {
  return r == Recompute::Selective && m.attention == Attention::Unfused;
}

// Why `v` model chunks per stage (interleaved 1F1B) cannot run on `g` with
// micro-batch `mb`, or "": Megatron's rules, L divisible by P·v and the
// micro-batches of a pipeline by P, and no pinned partition.
std::string virtual_stages_problem(const Job& job, const Grid& g, int mb, int v);
// The forwards stage s of P runs before its first backward in Megatron's
// interleaved order, of M micro-batches in v chunks: every one where M = P,
// else min(M·v, 2(P − s − 1) + (v − 1)·P) (MODEL.md §9).
inline long long interleaved_warmup(long long P, long long s, long long v, long long M) {
  const long long total = M * v;
  return M == P ? total : std::min(total, 2 * (P - s - 1) + (v - 1) * P);
}
// Why sequence parallelism (MODEL.md §13) cannot split m's micro-batch of
// `mb` sequences over g's Y axis, or "": it needs G_y > 1 and the tokens of
// a micro-batch divisible by G_y.
std::string sequence_parallel_problem(const ModelSpec& m, const Grid& g, int mb);
// Why `pinned` cannot split m's blocks over `stages` stages, or "".
std::string stage_layers_problem(const ModelSpec& m, int stages, const std::vector<int>& pinned);

// One pipeline stage's share of the model: a contiguous run of blocks from
// `first_block`; the first stage also holds the embedding and positions, the
// last the final LayerNorm, LM head and loss. Without stages the one stage
// is both.
struct Stage {
  int index = 0;
  int blocks = 0;
  bool first = true, last = true;
  int first_block = 0;
};
std::vector<Stage> stages_of(const Job& job, const Grid& g);
Stage stage_of(const Job& job, const Grid& g, int index);
// The stages whose cost differs (blocks, first, last): with equal runs the
// first, one middle (standing for all G_p − 2 of them) and the last; one
// stage when G_p = 1. `copies` says how many each stands for.
inline constexpr int kMaxStageKinds = 4;
struct StageKinds {
  std::array<Stage, kMaxStageKinds> stage;
  std::array<int, kMaxStageKinds> copies{};
  int count = 0;
  int stages = 1;  // G_p
  std::vector<int> kind;  // of each stage: its stage[] entry, whose index is that kind's first
  std::vector<Stage> each;  // every stage, its own blocks
  int kind_of(int i) const { return kind[size_t(i)]; }
};
StageKinds distinct_stages(const Job& job, const Grid& g);

// A linear layer k → n. A "transposed" layer takes its input split over Y
// and its output over X, so consecutive layers need no redistribution.
struct LinearLayer {
  const char* name;
  double k, n;
  bool transposed;
};
// QKV, attention-out, FC1, FC2: the block's linear layers in forward order.
inline constexpr int kBlockLayers = 4;
std::array<LinearLayer, kBlockLayers> block_layers(const ModelSpec& m);
LinearLayer lm_head(const ModelSpec& m);

// A layer's weight on one rank: the (k_local × n_local) block of its grid
// cell, sharded over Z into `shard` elements (padded: `gathered` = shard·G_z).
struct LocalWeight {
  double k_local, n_local, shard, gathered;
};
LocalWeight local_weight(const LinearLayer& l, const Grid& g);

// Parameters one rank holds. Sharded weights are padded up to a multiple of
// G_z (the padding is stored and communicated, so it is priced).
struct LocalParams {
  double sharded = 0;     // weight-shard elements (linear layers, embedding, LM head)
  double replicated = 0;  // biases, LayerNorm weights, positions
  double largest_block = 0;  // the largest gathered weight k·n/(G_x·G_y), padded
};
LocalParams local_params(const ModelSpec& m, const Grid& g, const Stage& s);
inline LocalParams local_params(const ModelSpec& m, const Grid& g) { return local_params(m, g, Stage{0, m.layers}); }

}  // namespace ff
