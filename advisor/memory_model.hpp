#pragma once
// Memory per GPU by term (MODEL.md §2); configurations that do not fit are
// filtered before they are priced.
#include <vector>

#include "job.hpp"
#include "machine_profile.hpp"

namespace ff {

struct MemoryUse {
  double states = 0;        // weight shards, optimizer state, fp32 gradient accumulators
  double gathered = 0;      // gathered-weight buffers (current, and prefetched under OAG)
  double grad_buffers = 0;  // unsharded gradients before the reduce-scatter (more in flight under ORS)
  double activations = 0;   // saved for backward, plus the backward working set
  double logits = 0;        // logits and their fp32 gradient
  double reserve = 0;       // framework, communication buffers, fragmentation
  double total() const { return states + gathered + grad_buffers + activations + logits + reserve; }
};
// A rank of stage `s`, holding `in_flight` micro-batches' activations.
MemoryUse stage_memory(const Job& job, const MachineProfile& p, const Grid& g, int micro_batch, bool recompute,
                       const Overlap& ov, const Stage& s, int in_flight);
// Micro-batches whose activations stage i holds at once (MODEL.md §9): under
// the static 1F1B order min(M, G_p − i); under arrival order (no tensor axes)
// min(M, G_p) on every stage but the last, which holds one.
int in_flight(const Grid& g, long long micro_steps, int stage);
// Every stage's rank, in stage order.
std::vector<MemoryUse> memory_by_stage(const Job& job, const MachineProfile& p, const Grid& g, int micro_batch,
                                       bool recompute, const Overlap& ov);
// The rank that needs the most, which decides whether the configuration fits.
MemoryUse memory_use(const Job& job, const MachineProfile& p, const Grid& g, int micro_batch, bool recompute,
                     const Overlap& ov);

}  // namespace ff
