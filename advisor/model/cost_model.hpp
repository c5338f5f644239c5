#pragma once
// The analytical model of one training iteration on the 4D grid (MODEL.md §1–2):
// every collective of every layer, compute from the GEMM table, overlap.
//
// Split in two so a search can share work: a Plan holds what does not depend
// on the placement or the overlap flags (sizes, counts, compute); pricing a
// plan with the links of a placement and a set of flags is cheap.
#include <array>
#include <string>
#include <vector>

#include "advisor/core/job.hpp"
#include "advisor/model/comm_model.hpp"
#include "advisor/model/kernel_inventory.hpp"
#include "advisor/model/memory_model.hpp"

namespace ff {

// SpGather: sequence parallelism's re-gather of a layer's input for its
// weight gradient, issued before and hidden under the input-gradient GEMM.
// SpReduceScatter: its input-gradient reduce-scatter, hidden under the
// weight-gradient GEMM by OAR or OTP. TpForward, TpBackward: its other
// collectives over Y, which only OTP (Transformer Engine's userbuffers)
// pipelines with the layer's forward or input-gradient GEMM (MODEL.md §13).
enum class Hide : uint8_t { None, OagForward, OagBackward, Oar, Ors, SpGather, SpReduceScatter, TpForward, TpBackward };
inline constexpr size_t kHideKinds = 9;

struct CommTerm {
  const char* layer;  // "qkv", "attn_out", "fc1", "fc2", "layernorm", "embedding", "lm_head", ...
  const char* what;   // "fwd weight all-gather", ...
  Axis axis;
  Coll coll;
  double elements;    // the buffer nccl-tests would count
  int elem_bytes;
  double count;       // occurrences per micro-step, or per iteration when per_step
  bool per_step;
  Hide hide = Hide::None;
  int slot = -1;      // position in the block (block_layers) for overlap windows
  bool bwd = false;   // runs in a micro-step's backward (not per_step, not forward)
  double bytes() const { return elements * elem_bytes; }
};

struct ComputeTerm {
  const char* layer;
  const char* what;
  double seconds;  // one occurrence
  double count;    // per micro-step, or per iteration when per_step
  bool per_step;
  bool bwd = false;  // runs in a micro-step's backward
  KernelClass cls = KernelClass::Gemm;
  double launches = 1;  // kernels one occurrence launches
};

struct Plan {
  Grid grid;
  Stage stage;  // the blocks, embedding and head this rank's stage holds
  int micro_batch = 1;
  Recompute recompute = Recompute::None;
  bool sequence_parallel = false;  // and G_y > 1
  Dtype dtype = Dtype::BF16;
  long long micro_steps = 1;
  double tokens = 0;  // t = micro_batch · S per rank per micro-step
  // The end-of-step scalars over all ranks (the gradient norm's sum of
  // squares before AdamW, the loss after): two 8-byte all-reduces, never hidden.
  double sync_s = 0;
  std::vector<CommTerm> comm;
  std::vector<ComputeTerm> compute;
  // Compute windows of the block's four linear layers, one occurrence each:
  // forward (GEMM and the element-wise work after it), backward (both GEMMs and
  // what follows), and the weight-gradient GEMM alone.
  std::array<double, kBlockLayers> fwd_window{}, bwd_window{}, wgrad_window{}, dgrad_window{};
  std::array<double, kBlockLayers> fwd_gemm_window{};  // the forward GEMM alone
  double compute_s = 0;        // per iteration
  double compute_fwd_s = 0, compute_bwd_s = 0;  // per micro-step
  double compute_step_s = 0;                    // once per iteration (the optimizer)
  double launches = 0;         // kernels per iteration, all terms
  double message_elements = 0; // a stage message: the activation shard [t, H/G_x] (MODEL.md §9)
  // Offload (MODEL.md §9): host-link bytes each way per iteration, the
  // bandwidth one GPU gets while its node's GPUs all copy, the optimizer's
  // buckets, and the chunks the data-parallel all-reduce is split into (0
  // bandwidth: the profile has no host link).
  double host_copy_bytes = 0, host_bw = 0;
  double offload_buckets = 1, offload_chunks = 1;
  double dp_bucket_bytes = 0;  // ODP's bucket size (MODEL.md §10)
  // With ODP and the sharded optimizer, the updated weights' all-gather
  // bucketed under the next forward (Megatron's --overlap-param-gather,
  // which its kernels come with; MODEL.md §10).
  bool overlap_param_gather = false;
  double dp_bytes = 0;         // the data-parallel reductions' bytes per iteration, what ODP buckets
  double model_flops = 0;      // per iteration, the Narayanan et al. count
  double hardware_flops = 0;   // adds the recomputed forward
  double peak_flops_all = 0;   // G × peak
  double overlap_efficiency = 0;
  double compute_slowdown = 0;  // compute under a hidden collective runs this much slower
  double nonblocking_slowdown = 1;
};
// The plan of one stage's rank (the whole model when G_p = 1).
// `sequence_parallel`: Megatron's on Y (MODEL.md §13), where G_y > 1.
void make_plan(const Job& job, const MachineProfile& p, const Grid& g, int micro_batch, Recompute recompute, Plan& out,
               const Stage& stage, bool sequence_parallel = false);
inline void make_plan(const Job& job, const MachineProfile& p, const Grid& g, int micro_batch, Recompute recompute,
                      Plan& out) {
  make_plan(job, p, g, micro_batch, recompute, out, stage_of(job, g, 0));
}
// Occurrences per iteration of a CommTerm or ComputeTerm: its count, times
// the micro-steps unless it runs once a step.
template <class Term>
double per_iteration(const Plan& plan, const Term& t) {
  return t.count * (t.per_step ? 1.0 : double(plan.micro_steps));
}
// Bytes per axis per iteration: each collective's buffer, as nccl-tests counts
// it, times how often it runs; what the engine's record reports per axis.
// Bytes per rank per step on each axis, as nccl-tests counts each buffer.
// With a sharded optimizer (and G_d > 1) the data-parallel reduction is a
// reduce-scatter of the same gradient bytes plus an all-gather of the
// updated weights in the training dtype.
PerAxis<double> bytes_per_step(const Plan& plan, bool sharded_optimizer = false);

struct Estimate {
  double time_s = 0;
  double compute_s = 0;
  double contention_s = 0;           // of compute_s: compute slowed under the collectives it hides
  PerAxis<double> comm_s{};          // before hiding
  PerAxis<double> exposed_comm_s{};  // what compute did not hide
  double bubble_s = 0;               // pipeline idle: time_s − compute_s − Σ exposed − host_s − sync_s (0 without stages)
  double host_s = 0;                 // offload: host-link time the data-parallel all-reduce did not hide
  double sync_s = 0;                 // the end-of-step scalar all-reduces over all ranks (Plan::sync_s)
  double mfu = 0, hfu = 0, tokens_per_s = 0;
  // One micro-step's forward and backward (compute plus exposed
  // communication), and what runs once an iteration: a stage's f, b and
  // data-parallel step in MODEL.md §9's schedule.
  double fwd_s = 0, bwd_s = 0, step_s = 0;
};

// Per axis, what the engine records as blocked: the exposed communication,
// and on P a stage's wait for its neighbour, which is its messages and the
// pipeline's idle time together (the engine cannot tell them apart).
inline PerAxis<double> engine_blocked_s(const Estimate& e) {
  PerAxis<double> b = e.exposed_comm_s;
  b[int(Axis::P)] += e.bubble_s;
  return b;
}

// One occurrence of each term on the links of a placement: times[i] issued
// blocking, times[n + i] issued non-blocking (n = plan.comm.size(); the same
// for terms no overlap flag touches). `times` holds 2n.
void term_times(const Plan& plan, const PerAxis<AxisLink>& links, double* times);
// Whether the overlap flags issue a term of this kind non-blocking, and what
// one occurrence of term i then costs before hiding.
inline bool issued_nonblocking(Hide h, const Overlap& ov) {
  switch (h) {
    case Hide::None: return false;
    case Hide::Oar: return ov.oar;
    case Hide::Ors: return ov.ors;
    case Hide::SpGather: return true;  // always ahead of the GEMM it feeds
    case Hide::SpReduceScatter: return ov.oar || ov.otp;
    case Hide::TpForward:
    case Hide::TpBackward: return ov.otp;
    default: return ov.oag;
  }
}
inline double issued_seconds(const Plan& plan, const double* times, const Overlap& ov, size_t i) {
  // A collective issued non-blocking so that it can overlap may itself run
  // slower than the blocking one (Open MPI's libnbc against its tuned ring):
  // its measured non-blocking figure, times the profile's slowdown for what
  // a wait-at-once benchmark does not see (progress only between GEMM panels).
  if (!issued_nonblocking(plan.comm[i].hide, ov)) return times[i];
  return times[plan.comm.size() + i] * plan.nonblocking_slowdown;
}
// Combine term times under the overlap flags; `hidden` (optional) receives
// the seconds hidden per occurrence of each term.
Estimate combine(const Plan& plan, const double* times, const Overlap& ov, double batch_tokens, double* hidden = nullptr);

PerAxis<AxisLink> placement_links(const MachineProfile& p, const Grid& g, const Order& o, LinkCache* cache = nullptr);
// Whether some group of `c`'s axes, or a pair of its stages, leaves its switch
// group (MODEL.md §2, "Switch groups"): false where the profile has none.
bool crosses_switch_groups(const MachineProfile& p, const Config& c);


}  // namespace ff
