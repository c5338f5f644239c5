#include "advisor/model/pipeline_model.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace ff {

Schedule flush_schedule(const std::vector<StageTime>& stages, long long M, double t, int v) {
  Schedule s;
  const double P = double(stages.size());
  double sum = 0, most = 0;
  for (const StageTime& x : stages) {
    sum += x.f + x.b;
    most = std::max(most, x.f + x.b);
  }
  // With exactly P micro-batches in flight there is no slack: the messages
  // of a round trip are on the critical path of the steady state.
  s.per_micro_s = std::max(most, (sum + 2 * (P - 1) * t) / P);
  // Interleaved, micro-batch 0 crosses the stages in chunks of 1/v: the fill
  // (and drain) is Σ s_i/v and a message at each of the P·v − 1 boundaries
  // between virtual stages, the steady state M − 1/v rounds.
  s.drained_s = sum / v + 2 * (P * v - 1) * t + (double(M) - 1.0 / v) * s.per_micro_s;
  // Stage i drains Σ_{j<i} b_j/v before stage 0; its data-parallel step starts then.
  double before = 0;
  s.time_s = -1;
  for (size_t i = 0; i < stages.size(); ++i) {
    double end = s.drained_s - before + stages[i].step;
    if (end > s.time_s) s.time_s = end, s.critical_stage = int(i);
    before += stages[i].b / v;
  }
  return s;
}

namespace {

struct Op {
  long long micro;
  bool bwd;
};

// Stage i's static 1F1B order: min(M, P − i) forwards, then backward and
// forward alternating, then the remaining backwards.
std::vector<Op> static_order(int i, int P, long long M) {
  std::vector<Op> ops;
  long long warm = std::min<long long>(M, P - i), next_f = 0, next_b = 0;
  for (; next_f < warm; ++next_f) ops.push_back({next_f, false});
  while (next_b < M) {
    ops.push_back({next_b++, true});
    if (next_f < M) ops.push_back({next_f++, false});
  }
  return ops;
}

}  // namespace

Schedule simulate_schedule(const std::vector<StageTime>& stages, long long M, double t, bool static_ord) {
  const int P = int(stages.size());
  constexpr double kNever = std::numeric_limits<double>::infinity();
  // Finish times of each stage's forward and backward of each micro-batch.
  std::vector<std::vector<double>> fwd_done(P, std::vector<double>(M, kNever)), bwd_done = fwd_done;
  std::vector<double> free_at(P, 0.0);
  std::vector<std::vector<Op>> order(P);
  std::vector<size_t> next(P, 0);
  for (int i = 0; i < P; ++i) order[i] = static_order(i, P, M);
  std::vector<long long> injected(P, 0), bwd_count(P, 0);

  // When an operation's input is there: a forward's activation from stage
  // i − 1 (stage 0: injected when fewer than P are in flight), a backward's
  // gradient from stage i + 1 (the last stage: its own forward).
  auto ready = [&](int i, const Op& op) -> double {
    if (!op.bwd) {
      if (i > 0) return fwd_done[i - 1][op.micro] + t;
      if (op.micro < P) return 0.0;
      return bwd_done[0][op.micro - P];  // the backward that freed the slot
    }
    if (i == P - 1) return fwd_done[i][op.micro];
    return bwd_done[i + 1][op.micro] + t;
  };
  auto run = [&](int i, const Op& op, double start) {
    double end = start + (op.bwd ? stages[i].b : stages[i].f);
    (op.bwd ? bwd_done : fwd_done)[i][op.micro] = end;
    free_at[i] = end;
  };

  const long long total = 2 * M * P;
  for (long long done = 0; done < total;) {
    // The stage that can start something earliest goes next, so every
    // arrival it depends on is already known.
    int best = -1;
    double best_start = kNever;
    Op best_op{};
    for (int i = 0; i < P; ++i) {
      // At most two (no allocation: this runs P times per operation).
      std::array<Op, 2> choice;
      size_t n_choices = 0;
      auto offer = [&](Op op) { choice[n_choices++] = op; };
      if (static_ord) {
        if (next[i] < order[i].size()) offer(order[i][next[i]]);
      } else {
        // Arrival order: the next forward not yet run and the next backward.
        if (i == P - 1) {  // forward then its backward, at once
          if (injected[i] < M && (injected[i] == bwd_count[i])) offer({injected[i], false});
          else if (bwd_count[i] < injected[i]) offer({bwd_count[i], true});
        } else {
          if (injected[i] < M) offer({injected[i], false});
          if (bwd_count[i] < injected[i]) offer({bwd_count[i], true});
        }
      }
      // This stage's pick: the operation it can start first; of two ready
      // when it frees, the message that arrived first, backward on a tie.
      int mine = -1;
      double mine_start = kNever, mine_ready = kNever;
      for (size_t c = 0; c < n_choices; ++c) {
        double r = ready(i, choice[c]);
        if (r == kNever) continue;
        double start = std::max(free_at[i], r);
        if (start < mine_start || (start == mine_start && (r < mine_ready || (r == mine_ready && choice[c].bwd))))
          mine = int(c), mine_start = start, mine_ready = r;
      }
      if (mine >= 0 && mine_start < best_start) best = i, best_start = mine_start, best_op = choice[size_t(mine)];
    }
    if (best < 0) break;  // cannot happen with M ≥ 1: the schedules are deadlock-free
    run(best, best_op, best_start);
    if (static_ord) ++next[best];
    else (best_op.bwd ? bwd_count[best] : injected[best])++;
    ++done;
  }

  Schedule s;
  s.drained_s = bwd_done[0][M - 1];
  s.time_s = -1;
  for (int i = 0; i < P; ++i) {
    double end = bwd_done[i][M - 1] + stages[i].step;
    if (end > s.time_s) s.time_s = end, s.critical_stage = i;
  }
  s.per_micro_s = M > 1 ? (s.drained_s - (bwd_done[0][0])) / double(M - 1) : s.drained_s;
  return s;
}

Schedule simulate_interleaved(const std::vector<StageTime>& stages, long long M, double t, int v) {
  const int P = int(stages.size());
  const long long total = M * v;
  constexpr double kNever = std::numeric_limits<double>::infinity();
  // Finish times per virtual stage j = c·P + i and micro-batch.
  std::vector<std::vector<double>> fwd_done(size_t(P) * v, std::vector<double>(size_t(M), kNever)), bwd_done = fwd_done;
  struct Chunk {
    int chunk;
    long long micro;
    bool bwd;
  };
  auto op = [&](long long k, bool bwd) {
    const int c = int((k / P) % v);
    return Chunk{bwd ? v - 1 - c : c, (k / (1LL * P * v)) * P + k % P, bwd};
  };
  std::vector<std::vector<Chunk>> order(static_cast<size_t>(P));
  for (int i = 0; i < P; ++i) {
    // Megatron runs every forward first where M = P.
    const long long warm = interleaved_warmup(P, i, v, M);
    for (long long k = 0; k < warm; ++k) order[size_t(i)].push_back(op(k, false));
    for (long long k = 0; k < total - warm; ++k) {
      order[size_t(i)].push_back(op(warm + k, false));
      order[size_t(i)].push_back(op(k, true));
    }
    for (long long k = total - warm; k < total; ++k) order[size_t(i)].push_back(op(k, true));
  }
  auto ready = [&](int i, const Chunk& x) -> double {
    const int j = x.chunk * P + i, last = P * v - 1;
    if (!x.bwd) return j == 0 ? 0.0 : fwd_done[size_t(j - 1)][size_t(x.micro)] + t;
    if (j == last) return fwd_done[size_t(j)][size_t(x.micro)];
    return bwd_done[size_t(j + 1)][size_t(x.micro)] + t;
  };
  std::vector<size_t> next(size_t(P), 0);
  std::vector<double> free_at(size_t(P), 0.0);
  for (long long done = 0; done < 2 * total * P; ++done) {
    // The stage that can start its next operation earliest goes next.
    int best = -1;
    double best_start = kNever;
    for (int i = 0; i < P; ++i) {
      if (next[size_t(i)] == order[size_t(i)].size()) continue;
      const double r = ready(i, order[size_t(i)][next[size_t(i)]]);
      const double start = std::max(free_at[size_t(i)], r);
      if (start < best_start) best = i, best_start = start;
    }
    if (best < 0) break;  // cannot happen under Megatron's rules (M a multiple of P)
    const Chunk& x = order[size_t(best)][next[size_t(best)]++];
    const double end = best_start + (x.bwd ? stages[size_t(best)].b : stages[size_t(best)].f) / v;
    (x.bwd ? bwd_done : fwd_done)[size_t(x.chunk * P + best)][size_t(x.micro)] = end;
    free_at[size_t(best)] = end;
  }
  Schedule s;
  s.drained_s = bwd_done[0][size_t(M - 1)];
  s.time_s = -1;
  for (int i = 0; i < P; ++i) {
    const double end = free_at[size_t(i)] + stages[size_t(i)].step;
    if (end > s.time_s) s.time_s = end, s.critical_stage = i;
  }
  s.per_micro_s = M > 1 ? (s.drained_s - bwd_done[0][0]) / double(M - 1) : s.drained_s;
  return s;
}

void make_staged_plan(const Job& job, const MachineProfile& p, const Grid& g, int mb, Recompute rc, StagedPlan& out,
                      bool sp, int virtual_stages) {
  out.virtual_stages = virtual_stages;
  out.blocking_messages = job.blocking_messages;
  out.kinds = distinct_stages(job, g);
  for (int k = 0; k < out.kinds.count; ++k) make_plan(job, p, g, mb, rc, out.plan[k], out.kinds.stage[k], sp);
}

void staged_term_times(const StagedPlan& sp, const PerAxis<AxisLink>& links, const PairLink& pairs, StagedTimes& out) {
  for (int k = 0; k < sp.kinds.count; ++k) {
    out.times[k].resize(2 * sp.plan[k].comm.size());
    term_times(sp.plan[k], links, out.times[k].data());
  }
  const Plan& first = sp.plan[0];
  out.message_s = first.grid.p > 1 ? message_time(first.message_elements * dtype_bytes(first.dtype), pairs) : 0;
  const AxisLink& d = links[static_cast<int>(Axis::D)];
  const int ar = static_cast<int>(Coll::AllReduce);
  const double alpha = d.size > 1 ? std::max(d.inside ? d.intra_alpha[ar] : 0.0, d.across ? d.inter_alpha[ar] : 0.0) : 0;
  const double call = d.size > 1 ? std::max(d.inside ? d.intra.call_s : 0.0, d.across ? d.inter.call_s : 0.0) : 0;
  for (int k = 0; k < sp.kinds.count; ++k) {
    const Plan& pl = sp.plan[k];
    // Both ways at once, bucket by bucket through two sets of buffers: the
    // first bucket's copy in and the last one's copy out have nothing to run
    // beside, so b buckets take b + 1 bucket-copies (one bucket: in, then out).
    out.host_copy_s[k] = pl.host_bw > 0 ? pl.host_copy_bytes / pl.host_bw * (1 + 1 / pl.offload_buckets) : 0;
    out.chunk_latency_s[k] = pl.offload_chunks * (call + ring_steps(Coll::AllReduce, d.size) * alpha);
    out.dp_buckets[k] = out.dp_bucket_s[k] = out.dp_last_bucket_s[k] = 0;
    out.dp_rs_bucket_s[k] = out.dp_rs_last_bucket_s[k] = 0;
    out.dp_reduce_scatter_s[k] = out.dp_all_gather_s[k] = 0;
    if (d.size <= 1 || pl.dp_bytes <= 0) continue;  // nothing for odp or sharding to change
    const double n = std::ceil(pl.dp_bytes / pl.dp_bucket_bytes);
    const double full = std::min(pl.dp_bytes, pl.dp_bucket_bytes), last = pl.dp_bytes - (n - 1) * pl.dp_bucket_bytes;
    out.dp_buckets[k] = n;
    out.dp_bucket_s[k] = collective_time(Coll::AllReduce, full, d);
    out.dp_last_bucket_s[k] = collective_time(Coll::AllReduce, last, d);
    out.dp_rs_bucket_s[k] = collective_time(Coll::ReduceScatter, full, d);
    out.dp_rs_last_bucket_s[k] = collective_time(Coll::ReduceScatter, last, d);
    // The updated weights come back in the training dtype: the buckets'
    // elements at its width, not the gradients'.
    double grad_width = 4;
    for (const CommTerm& c : pl.comm)
      if (c.axis == Axis::D && c.per_step) grad_width = c.elem_bytes;
    const double ag = dtype_bytes(pl.dtype) / grad_width;
    out.dp_ag_bucket_s[k] = collective_time(Coll::AllGather, full * ag, d);
    out.dp_ag_last_bucket_s[k] = collective_time(Coll::AllGather, last * ag, d);
    // Layer by layer: each gradient (--grad-dtype) reduce-scattered, each weight (in
    // the training dtype) all-gathered back.
    for (const CommTerm& c : pl.comm)
      if (c.axis == Axis::D && c.per_step) {
        out.dp_reduce_scatter_s[k] += c.count * collective_time(Coll::ReduceScatter, c.bytes(), d);
        out.dp_all_gather_s[k] += c.count * collective_time(Coll::AllGather, c.elements * dtype_bytes(pl.dtype), d);
      }
  }
}

double bucketed_exposed(double n, double each, double last, double backward_s) {
  if (n <= 0) return 0;
  // Buckets arrive every backward/n; the link either keeps up (only the last
  // bucket runs past the backward) or is the bottleneck from the first on.
  return std::max(last, backward_s / n + (n - 1) * each + last - backward_s);
}

namespace {

// The data-parallel step as the flags price it, in place of combine()'s
// per-layer all-reduces: the gradient reduction (all-reduce, or
// reduce-scatter when sharded) layer by layer, or with ODP in buckets hidden
// (at the overlap efficiency) under the last micro-step's backward; sharded,
// the weights all-gathered after the optimizer, which runs on 1/G_d of the
// state.
void price_data_parallel(Estimate& e, const Plan& plan, const StagedTimes& st, int k, bool odp, bool sharded) {
  const int d = static_cast<int>(Axis::D);
  double total = e.comm_s[d], exposed = e.exposed_comm_s[d];
  if (sharded) total = exposed = st.dp_reduce_scatter_s[k];
  if (odp) {
    const double n = st.dp_buckets[k];
    const double each = sharded ? st.dp_rs_bucket_s[k] : st.dp_bucket_s[k];
    const double last = sharded ? st.dp_rs_last_bucket_s[k] : st.dp_last_bucket_s[k];
    total = n > 0 ? (n - 1) * each + last : 0;
    exposed = total - plan.overlap_efficiency * (total - bucketed_exposed(n, each, last, e.bwd_s));
    // The backward it hides under runs compute_slowdown slower meanwhile.
    const double slowed = (total - exposed) * plan.compute_slowdown;
    e.contention_s += slowed;
    e.compute_s += slowed;
    e.step_s += slowed;
    e.time_s += slowed;
  }
  if (sharded && odp && plan.overlap_param_gather) {
    // Bucket by bucket ahead of the next iteration's first forward, as ODP's
    // reduce-scatter runs behind the last backward: the same arithmetic.
    const double n = st.dp_buckets[k], each = st.dp_ag_bucket_s[k], last = st.dp_ag_last_bucket_s[k];
    const double ag = n > 0 ? (n - 1) * each + last : 0;
    const double ag_exposed = ag - plan.overlap_efficiency * (ag - bucketed_exposed(n, each, last, e.fwd_s));
    const double slowed = (ag - ag_exposed) * plan.compute_slowdown;
    e.contention_s += slowed;
    e.compute_s += slowed;
    e.step_s += slowed;
    e.time_s += slowed;
    total += ag;
    exposed += ag_exposed;
  } else if (sharded) {
    total += st.dp_all_gather_s[k];
    exposed += st.dp_all_gather_s[k];
  }
  if (sharded) {
    const double saved = plan.compute_step_s * (1 - 1.0 / plan.grid.d);
    e.compute_s -= saved;
    e.step_s -= saved;
    e.time_s -= saved;
  }
  const double delta = exposed - e.exposed_comm_s[d];
  e.comm_s[d] = total;
  e.exposed_comm_s[d] = exposed;
  e.step_s += delta;
  e.time_s += delta;
}

// Offload's host link against the data-parallel all-reduce it overlaps with,
// chunk by chunk (MODEL.md §9).
void add_offload(Estimate& e, const Plan& plan, double copy_s, double latency_s) {
  const double A = e.exposed_comm_s[static_cast<int>(Axis::D)], C = copy_s, n = plan.offload_chunks;
  e.host_s = std::max(A, C) + std::min(A, C) / n + latency_s - A;
  e.step_s += e.host_s;
  e.time_s += e.host_s;
}

void rates(Estimate& e, const Plan& plan, double batch_tokens) {
  e.mfu = plan.model_flops / (e.time_s * plan.peak_flops_all);
  e.hfu = plan.hardware_flops / (e.time_s * plan.peak_flops_all);
  e.tokens_per_s = batch_tokens / e.time_s;
}

}  // namespace

void stage_times(const StagedPlan& sp, const std::array<Estimate, kMaxStageKinds>& per_kind, std::vector<StageTime>& out) {
  out.clear();
  for (int k = 0; k < sp.kinds.count; ++k)
    for (int c = 0; c < sp.kinds.copies[k]; ++c)
      out.push_back({per_kind[k].fwd_s, per_kind[k].bwd_s, per_kind[k].step_s});
}

std::vector<StageTime> with_blocking_sends(std::vector<StageTime> stages, double t, int v) {
  const int P = int(stages.size());
  for (int i = 0; i < P; ++i) {
    stages[i].f += t * (v - (i == P - 1 ? 1 : 0));
    stages[i].b += t * (v - (i == 0 ? 1 : 0));
  }
  return stages;
}

std::vector<StageTime> stage_times(const StagedPlan& sp, const std::array<Estimate, kMaxStageKinds>& per_kind) {
  std::vector<StageTime> v;
  stage_times(sp, per_kind, v);
  return v;
}

Estimate combine_staged(const StagedPlan& sp, const StagedTimes& st, const Overlap& ov, OptimizerState os,
                        double batch_tokens, std::array<Estimate, kMaxStageKinds>* per_kind, Schedule* schedule) {
  std::array<Estimate, kMaxStageKinds> kind;
  combine_kinds(sp, st, ov, batch_tokens, kind);
  return finish_staged(sp, st, kind, ov, os, batch_tokens, per_kind, schedule);
}

void combine_kinds(const StagedPlan& sp, const StagedTimes& st, const Overlap& ov, double batch_tokens,
                   std::array<Estimate, kMaxStageKinds>& kind) {
  for (int k = 0; k < sp.kinds.count; ++k) kind[k] = combine(sp.plan[k], st.times[k].data(), ov, batch_tokens);
}

Estimate finish_staged(const StagedPlan& sp, const StagedTimes& st, std::array<Estimate, kMaxStageKinds> kind, const Overlap& ov,
                       OptimizerState os, double batch_tokens, std::array<Estimate, kMaxStageKinds>* per_kind, Schedule* schedule) {
  const bool odp = ov.odp && sp.plan[0].grid.d > 1, sharded = os.sharded && sp.plan[0].grid.d > 1;
  if (odp || sharded || os.offload)
    for (int k = 0; k < sp.kinds.count; ++k) {
      if (odp || sharded) price_data_parallel(kind[k], sp.plan[k], st, k, odp, sharded);
      if (os.offload) add_offload(kind[k], sp.plan[k], st.host_copy_s[k], st.chunk_latency_s[k]);
      rates(kind[k], sp.plan[k], batch_tokens);
    }
  if (per_kind) *per_kind = kind;
  const Plan& plan0 = sp.plan[0];
  if (plan0.grid.p == 1) {
    if (schedule) *schedule = Schedule{kind[0].fwd_s + kind[0].bwd_s, kind[0].time_s, kind[0].time_s, 0};
    return kind[0];
  }
  // Reused: this runs for every staged configuration a search prices.
  thread_local std::vector<StageTime> stages;
  stage_times(sp, kind, stages);
  const int v = sp.virtual_stages;
  const double t = st.message_s;
  if (sp.blocking_messages) stages = with_blocking_sends(std::move(stages), t, v);  // keeps the reused buffer
  Schedule s = flush_schedule(stages, plan0.micro_steps, sp.blocking_messages ? 0.0 : t, v);
  if (schedule) *schedule = s;
  // The breakdown is the critical stage's: its compute and exposed
  // communication, on the P axis the messages of one fill and drain (or,
  // blocking, the stage's own sends of every micro-batch), and the rest idle.
  const int P = plan0.grid.p;
  const int k = sp.kinds.kind_of(s.critical_stage);
  Estimate e = kind[k];
  const int pipe = static_cast<int>(Axis::P);
  const int c = s.critical_stage;
  e.comm_s[pipe] = 2.0 * double(plan0.micro_steps) * v * t;  // interleaved: v-fold
  e.exposed_comm_s[pipe] = sp.blocking_messages
                               ? double(plan0.micro_steps) * t * (2 * v - (c == 0 ? 1 : 0) - (c == P - 1 ? 1 : 0))
                               : 2.0 * (P * v - 1) * t;
  e.time_s = s.time_s;
  double busy = e.compute_s + e.host_s + e.sync_s;
  for (double x : e.exposed_comm_s) busy += x;
  e.bubble_s = std::max(0.0, e.time_s - busy);
  rates(e, plan0, batch_tokens);
  return e;
}

}  // namespace ff
