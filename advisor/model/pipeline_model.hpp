#pragma once
// Pipeline stages (MODEL.md §9): the flush schedule's closed form, a
// discrete-event simulation of the orders the engine runs to hold it against,
// and the pricing of a configuration whose ranks belong to different stages.
#include <array>
#include <vector>

#include "advisor/model/cost_model.hpp"

namespace ff {

// One stage: a micro-batch's forward and backward (compute plus the stage's
// exposed tensor-parallel communication), and what it runs once an iteration
// after the flush (data-parallel reductions, optimizer).
struct StageTime {
  double f = 0, b = 0, step = 0;
};

struct Schedule {
  double per_micro_s = 0;  // u: the steady state's time per micro-batch
  double drained_s = 0;    // T: the last backward of stage 0 is done
  double time_s = 0;       // the iteration: max over stages of its end + its step
  int critical_stage = 0;  // the stage that sets time_s
};

// u = max(max_i s_i, (Σ s_i + 2(P−1)·t)/P), T = Σ s_i/v + 2(P−1)·t + (M − 1/v)·u,
// end_i = T − Σ_{j<i} b_j/v, time = max_i(end_i + step_i); s_i = f_i + b_i,
// t one message's time, M micro-batches per pipeline, v model chunks per
// stage (interleaved 1F1B: the fill and drain shrink v-fold).
Schedule flush_schedule(const std::vector<StageTime>& stages, long long micro_batches, double message_s, int v = 1);

// The schedule run event by event. Static order: stage i runs min(M, P − i)
// forwards, then alternates backward and forward (1F1B). Arrival order: a
// stage runs whichever message came first (AxoNN's Waitany; backward on a
// tie), stage 0 injecting a new micro-batch after each backward, at most P
// in flight. The last stage runs a micro-batch's backward right after its
// forward either way. Messages take message_s and do not occupy the stage.
Schedule simulate_schedule(const std::vector<StageTime>& stages, long long micro_batches, double message_s,
                           bool static_order);
// Megatron's interleaved 1F1B with v chunks per stage, event by event: stage
// i runs min(M·v, 2(P − i − 1) + (v − 1)·P) forwards, then forward and
// backward alternating, then the remaining backwards; forward k is chunk
// (k / P) mod v of micro-batch (k / (P·v))·P + k mod P, backward k the chunk
// v − 1 − (k / P) mod v. Chunk c of stage i is virtual stage c·P + i; each
// virtual stage's input is a message from the one before (t), a chunk takes
// f_i/v and b_i/v.
Schedule simulate_interleaved(const std::vector<StageTime>& stages, long long micro_batches, double message_s, int v);

// A configuration's plans, one per kind of stage (distinct_stages: first,
// middle runs, last; one when G_p = 1), priced together.
struct StagedPlan {
  std::array<Plan, kMaxStageKinds> plan;
  StageKinds kinds;
  int virtual_stages = 1;  // model chunks per stage (interleaved 1F1B)
  bool blocking_messages = false;  // Job::blocking_messages
};
void make_staged_plan(const Job& job, const MachineProfile& p, const Grid& g, int micro_batch, Recompute recompute,
                      StagedPlan& out, bool sequence_parallel = false, int virtual_stages = 1);

// Term times for every kind of stage on a placement's links, in the layout
// term_times uses, one block per kind.
struct StagedTimes {
  std::array<std::vector<double>, kMaxStageKinds> times;
  double message_s = 0;  // one stage message each way on the P axis' pairs
  // Offload, per kind: the host-link copies of an iteration, and the latency
  // the all-reduce's chunks add, n·2(G_d − 1)·α.
  std::array<double, kMaxStageKinds> host_copy_s{}, chunk_latency_s{};
  // ODP, per kind: the data-parallel gradients in buckets, how many, and one
  // full and the last bucket's all-reduce.
  std::array<double, kMaxStageKinds> dp_buckets{}, dp_bucket_s{}, dp_last_bucket_s{};
  // The optimizer state sharded over D (ZeRO-1): the gradients
  // reduce-scattered instead (layer by layer, or a bucket and the last), the
  // updated weights all-gathered after the optimizer.
  std::array<double, kMaxStageKinds> dp_reduce_scatter_s{}, dp_rs_bucket_s{}, dp_rs_last_bucket_s{}, dp_all_gather_s{};
  // The same buckets' all-gather of the updated weights (training dtype).
  std::array<double, kMaxStageKinds> dp_ag_bucket_s{}, dp_ag_last_bucket_s{};
};

// ODP (MODEL.md §10): `buckets` all-reduces of `each` seconds (the last
// `last`), bucket j ready at (j+1)/n of a backward of `backward_s`, issued in
// order on one link; what runs past the end of that backward.
double bucketed_exposed(double buckets, double each, double last, double backward_s);
void staged_term_times(const StagedPlan& sp, const PerAxis<AxisLink>& links, const PairLink& pairs,
                       StagedTimes& out);

// The iteration: without stages, ODP, offload or sharding exactly combine();
// with stages the schedule, its breakdown taken from the stage that sets the
// time. Each stage's data-parallel step is priced as the flags say: sharded,
// reduce-scatter then all-gather, the optimizer on 1/G_d of the state; ODP,
// the gradient reduction in buckets under the last backward; offload, the host
// link the reduction does not hide, max(A, C) + min(A, C)/n + n·2(G_d − 1)·α −
// A. `per_kind` (optional) receives each kind's own estimate, `schedule` the
// schedule.
Estimate combine_staged(const StagedPlan& sp, const StagedTimes& st, const Overlap& ov, OptimizerState os,
                        double batch_tokens, std::array<Estimate, kMaxStageKinds>* per_kind = nullptr, Schedule* schedule = nullptr);
// combine_staged in two halves, so that a search combines the flags once for
// every optimizer-state choice: each kind's combine() under the flags, then
// the data-parallel step (odp, sharding, offload) and the schedule.
void combine_kinds(const StagedPlan& sp, const StagedTimes& st, const Overlap& ov, double batch_tokens,
                   std::array<Estimate, kMaxStageKinds>& kind);
Estimate finish_staged(const StagedPlan& sp, const StagedTimes& st, std::array<Estimate, kMaxStageKinds> kind, const Overlap& ov,
                       OptimizerState os, double batch_tokens, std::array<Estimate, kMaxStageKinds>* per_kind = nullptr,
                       Schedule* schedule = nullptr);

// Blocking messages (MODEL.md §9): each stage's sends folded into its own
// forward and backward, t each (a micro-batch leaves stage i forward v
// times, but for the last virtual stage, and backward v times, but for the
// first); the schedule then runs with messages that take no further time.
std::vector<StageTime> with_blocking_sends(std::vector<StageTime> stages, double message_s, int v);

// Every stage's time in stage order, from the kinds' estimates.
std::vector<StageTime> stage_times(const StagedPlan& sp, const std::array<Estimate, kMaxStageKinds>& per_kind);
void stage_times(const StagedPlan& sp, const std::array<Estimate, kMaxStageKinds>& per_kind, std::vector<StageTime>& out);

}  // namespace ff
