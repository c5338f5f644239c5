#include "advisor/model/memory_model.hpp"

#include <algorithm>

namespace ff {

MemoryUse stage_memory(const Job& job, const MachineProfile& p, const Grid& g, int mb, Recompute recompute,
                       const Overlap& ov, const Stage& st, double n_in_flight, OptimizerState os, bool sp) {
  const ModelSpec& m = job.model;
  double b = dtype_bytes(job.dtype);
  // bf16: bf16 weight, fp32 master, Adam m and v, the gradient accumulator
  // (fp32, or bf16/fp16 with --grad-dtype). fp32: weight, m, v, accumulator.
  const double grad = dtype_bytes(job.grad_dtype);
  double state_bytes = low_precision(job.dtype) ? 2 + 4 + 8 + grad : 4 + 8 + grad;
  LocalParams lp = local_params(m, g, st);
  MemoryUse u;
  const double params = lp.sharded + lp.replicated;
  const bool offload = os.offload;
  // Sharded (ZeRO-1): the master, m and v divided over D; the weight and the
  // gradient shard (--grad-dtype) stay whole.
  const double kept = offload_gpu_bytes(job.dtype, job.grad_dtype), moved = offload_host_bytes(job.dtype);
  u.states = params * (offload ? kept : os.sharded ? kept + moved / g.d : state_bytes);
  if (offload) {
    u.host = params * offload_host_bytes(job.dtype);
    // Two sets of fp32 bucket buffers, one copied in while the other is
    // updated and copied out (the engine's offload), each holding m, v and,
    // where the weight is not the master, the master.
    const double arrays = low_precision(job.dtype) ? 3 : 2;
    u.buckets = 2 * arrays * std::min(kOffloadBucket, params) * 4;
  }
  u.gathered = lp.largest_block * b * (ov.oag ? 2 : 1);
  // Under ORS one layer's gradient is being reduced while the next is computed.
  u.grad_buffers = lp.largest_block * b * (ov.ors ? 2 : 1);

  const double t = double(mb) * m.seq_len, hx = double(m.hidden) / g.x, fy = double(m.ffn) / g.y;
  const auto layers = block_layers(m);
  const double qkv = layers[0].n / g.y, ay = m.attention_width() / g.y, up = layers[2].n / g.y;
  // Saved per block: norm 1 in and out, QKV out, attention out, norm 2 in and
  // out, FC1 out (gate and up for SwiGLU), the activation's out; fp32
  // softmax log-sum-exp per head and the norms' statistics (LayerNorm two a
  // token, RMSNorm one).
  const double stats = m.norm == Norm::LayerNorm ? 2 : 1;
  // Sequence parallel: the norms' inputs, outputs and statistics hold t/G_y tokens.
  const double split = sp ? g.y : 1;
  double block = t * (4 * hx / split + qkv + ay + up + fy) * b + t * (double(m.heads) / g.y) * 4 +
                 2 * stats * t / split * 4;
  // Unfused attention keeps the S×S probabilities (and a byte mask with
  // dropout); selective recompute keeps them for the one block being
  // recomputed only (Korthikanti et al.'s 5·a·s²·b term gone; with flash
  // attention there is nothing to drop).
  double working = 2 * t * std::max({hx, qkv, up}) * b;  // gradients in flight in backward
  if (m.attention == Attention::Unfused) {
    const double scores = t * (double(m.heads) / g.y) * m.seq_len * (b + (m.attention_dropout ? 1 : 0));
    (recomputes_attention_core(recompute, m) ? working : block) += scores;
  }
  // Full recompute keeps each block's input per micro-batch in flight and
  // one block's full activations while it is recomputed.
  const double blocks = st.blocks, n = n_in_flight;
  u.activations = recompute == Recompute::Full ? n * blocks * t * hx / split * b + block + working
                                               : n * blocks * block + working;
  u.logits = st.last ? t * (double(m.padded_vocab) / g.y) * (b + 4) : 0;
  u.reserve = p.memory_reserve;
  return u;
}

std::string optimizer_state_problem(const MachineProfile& p, OptimizerState os) {
  if (os.offload && !p.has_host)
    return "machine '" + p.name + "' gives no host link (host.link_GBps, host.memory_GiB) to offload over; measure "
           "it or add the figures";
  if (os.offload && os.sharded)
    return "the pair (reduce-scatter, optimizer on the host, all-gather) is not priced yet";
  return "";
}

double in_flight(const Grid& g, long long micro_steps, int stage, int v) {
  const long long P = g.p;
  // Interleaved: Megatron runs every forward first where M = P.
  // In flight: the warm-up's forwards and the one the steady state adds,
  // at most every chunk.
  if (v > 1)
    return double(std::min(micro_steps * v, interleaved_warmup(P, stage, v, micro_steps) + 1)) / v;
  if (g.x * g.y * g.z > 1) return int(std::min(micro_steps, P - stage));
  return stage == g.p - 1 ? 1 : int(std::min(micro_steps, P));
}

std::vector<MemoryUse> memory_by_stage(const Job& job, const MachineProfile& p, const Grid& g, int mb, Recompute recompute,
                                       const Overlap& ov, OptimizerState os, bool sp, int v) {
  const long long M = job.batch / (1LL * mb * g.z * g.d);
  std::vector<MemoryUse> out;
  for (const Stage& s : stages_of(job, g))
    out.push_back(stage_memory(job, p, g, mb, recompute, ov, s, in_flight(g, M, s.index, v), os, sp));
  return out;
}

MemoryUse memory_use(const Job& job, const MachineProfile& p, const Grid& g, int mb, Recompute recompute,
                     const Overlap& ov, OptimizerState os, bool sp, const std::vector<Stage>* given, int v) {
  const std::vector<Stage> own = given ? std::vector<Stage>{} : stages_of(job, g);
  const std::vector<Stage>& stages = given ? *given : own;
  if (g.p == 1) return stage_memory(job, p, g, mb, recompute, ov, stages[0], 1, os, sp);
  // Where stages 1 … G_p − 2 hold no more blocks than the one before (equal
  // runs, the partition's own: the larger first) and no more in flight than
  // stage 1, first, second and last decide; a pinned partition, every stage.
  const long long M = job.batch / (1LL * mb * g.z * g.d);
  bool descending = true;
  for (int i = 2; i + 1 < g.p; ++i) descending = descending && stages[size_t(i)].blocks <= stages[size_t(i - 1)].blocks;
  std::vector<int> which{0, std::min(1, g.p - 1), g.p - 1};
  if (!descending) {
    which.clear();
    for (int i = 0; i < g.p; ++i) which.push_back(i);
  }
  MemoryUse most;
  for (int i : which) {
    MemoryUse u = stage_memory(job, p, g, mb, recompute, ov, stages[size_t(i)], in_flight(g, M, i, v), os, sp);
    if (u.total() > most.total()) most = u;
    most.host = std::max(most.host, u.host);
  }
  return most;
}

}  // namespace ff
