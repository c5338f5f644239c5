#pragma once
// Memory per GPU by term (MODEL.md §2); configurations that do not fit are
// filtered before they are priced.
#include <string>
#include <vector>

#include "advisor/core/job.hpp"
#include "advisor/core/machine_profile.hpp"

namespace ff {

struct MemoryUse {
  double states = 0;        // weight shards, optimizer state, gradient accumulators (--grad-dtype)
  double gathered = 0;      // gathered-weight buffers (current, and prefetched under OAG)
  double grad_buffers = 0;  // unsharded gradients before the reduce-scatter (more in flight under ORS)
  double activations = 0;   // saved for backward, plus the backward working set
  double logits = 0;        // logits and their fp32 gradient
  double reserve = 0;       // framework, communication buffers, fragmentation
  double buckets = 0;       // offload: the optimizer's fp32 bucket buffers
  double host = 0;          // offload: master weights and Adam state in host memory (not in total())
  double total() const { return states + gathered + grad_buffers + activations + logits + reserve + buckets; }
};
// Offload (MODEL.md §9): the optimizer runs bucket by bucket through four
// fp32 buffers of this many elements, and the data-parallel all-reduce is
// issued in chunks of kOffloadChunk buckets.
inline constexpr double kOffloadBucket = 4.0 * 1024 * 1024;
inline constexpr int kOffloadChunk = 4;
// Bytes per parameter offload keeps on the GPU (training-dtype weight and the
// gradient shard in `g`) and in host memory (fp32 master unless the weight is
// it, Adam m and v), and so copies each way every iteration.
inline double offload_gpu_bytes(Dtype t, Dtype g) { return dtype_bytes(t) + dtype_bytes(g); }
inline double offload_host_bytes(Dtype t) { return low_precision(t) ? 4 + 8 : 8; }
// Where the optimizer state lives: on the GPU (replicated over D, or
// divided over it) or in host memory.
struct OptimizerState {
  bool offload = false;
  bool sharded = false;
};
// Why the optimizer state cannot live as `os` says on this machine, or "".
std::string optimizer_state_problem(const MachineProfile& p, OptimizerState os);
// A rank of stage `s`, holding `in_flight` micro-batches' activations (of all
// its blocks; interleaved, a fraction: chunks / v).
// `sequence_parallel`: the norm and residual regions' activations divided by
// G_y (MODEL.md §13).
MemoryUse stage_memory(const Job& job, const MachineProfile& p, const Grid& g, int micro_batch, Recompute recompute,
                       const Overlap& ov, const Stage& s, double in_flight, OptimizerState os = {},
                       bool sequence_parallel = false);
// Micro-batches whose activations stage i holds at once (MODEL.md §9): under
// the static 1F1B order min(M, G_p − i); under arrival order (no tensor axes)
// min(M, G_p) on every stage but the last, which holds one. Interleaved (v
// chunks, Megatron's order): min(M·v, 2(G_p − i − 1) + (v − 1)·G_p + 1)
// chunks of 1/v of the stage's blocks.
double in_flight(const Grid& g, long long micro_steps, int stage, int virtual_stages = 1);
// Every stage's rank, in stage order.
std::vector<MemoryUse> memory_by_stage(const Job& job, const MachineProfile& p, const Grid& g, int micro_batch,
                                       Recompute recompute, const Overlap& ov, OptimizerState os = {},
                                       bool sequence_parallel = false, int virtual_stages = 1);
// The rank that needs the most, which decides whether the configuration fits.
// `stages`: stages_of(job, g), where the caller has them (the search, per grid).
MemoryUse memory_use(const Job& job, const MachineProfile& p, const Grid& g, int micro_batch, Recompute recompute,
                     const Overlap& ov, OptimizerState os = {}, bool sequence_parallel = false,
                     const std::vector<Stage>* stages = nullptr, int virtual_stages = 1);
// Host memory one GPU's offloaded state may use: the node's, shared.
inline double host_memory_per_gpu(const MachineProfile& p) { return p.host_memory / p.gpus_per_node; }
// Whether `u` fits the GPU's memory and, offloaded, its share of the host's.
inline bool fits_in_memory(const MemoryUse& u, const MachineProfile& p) {
  return u.total() <= p.hbm_capacity && u.host <= host_memory_per_gpu(p);
}

}  // namespace ff
