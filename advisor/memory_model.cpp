#include "memory_model.hpp"

#include <algorithm>

namespace ff {

MemoryUse memory_use(const Job& job, const MachineProfile& p, const Grid& g, int mb, bool recompute,
                     const Overlap& ov) {
  const ModelSpec& m = job.model;
  double b = dtype_bytes(job.dtype);
  // bf16: bf16 weight, fp32 master, Adam m and v, fp32 gradient accumulator.
  // fp32: weight, m, v, gradient accumulator.
  double state_bytes = low_precision(job.dtype) ? 2 + 4 + 8 + 4 : 16;
  LocalParams lp = local_params(m, g);
  MemoryUse u;
  u.states = (lp.sharded + lp.replicated) * state_bytes;
  u.gathered = lp.largest_block * b * (ov.oag ? 2 : 1);
  // Under ORS one layer's gradient is being reduced while the next is computed.
  u.grad_buffers = lp.largest_block * b * (ov.ors ? 2 : 1);

  double t = double(mb) * m.seq_len, H = m.hidden, F = m.ffn;
  double hx = H / g.x, hy = H / g.y, fy = F / g.y;
  // Saved per block: LN1 in and out, QKV out, attention out, LN2 in and out,
  // FC1 out, GELU out; fp32 softmax log-sum-exp per head and LayerNorm stats.
  double block = t * (4 * hx + 3 * hy + hy + 2 * fy) * b + t * (double(m.heads) / g.y) * 4 + 2 * 2 * t * 4;
  double working = 2 * t * std::max({hx, 3 * hy, fy}) * b;  // gradients in flight in backward
  u.activations = recompute ? m.layers * t * hx * b + block + working : m.layers * block + working;
  u.logits = t * (double(m.padded_vocab) / g.y) * (b + 4);
  u.reserve = p.memory_reserve;
  return u;
}

}  // namespace ff
