#include "advisor/core/job.hpp"

#include <algorithm>
#include <cmath>

namespace ff {

std::string split_problem(const Job& job, const Grid& g, int mb) {
  const ModelSpec& m = job.model;
  auto s = [](long long v) { return std::to_string(v); };
  if (m.hidden % g.x) return "hidden " + s(m.hidden) + " is not divisible by G_x=" + s(g.x);
  if (m.heads % g.y) return "heads " + s(m.heads) + " are not divisible by G_y=" + s(g.y) + " (whole heads per Y rank)";
  if (m.kv_head_count() % g.y)
    return "KV heads " + s(m.kv_head_count()) + " are not divisible by G_y=" + s(g.y) +
           " (each Y rank holds the KV heads its query heads read)";
  if (m.ffn % g.y) return "FFN size " + s(m.ffn) + " is not divisible by G_y=" + s(g.y);
  if (m.padded_vocab % g.y) return "padded vocabulary " + s(m.padded_vocab) + " is not divisible by G_y=" + s(g.y);
  if (g.p > m.layers)
    return "G_pipe=" + s(g.p) + " stages are more than the " + s(m.layers) + " layers (a stage holds at least one block)";
  if (m.layers % g.p)
    return "layers " + s(m.layers) + " are not divisible by G_pipe=" + s(g.p) + " (stages hold equal runs of blocks)";
  long long per = 1LL * mb * g.z * g.d;
  if (job.batch % per)
    return "batch " + s(job.batch) + " is not divisible by micro_batch·G_z·G_data=" + s(mb) + "·" + s(g.z) + "·" +
           s(g.d);
  return "";
}

std::string engine_model_problem(const ModelSpec& m) {
  if (m.positions == Positions::Rope && m.head_size() % 2)
    return "rotary positions turn pairs of a head's columns, and head_dim " + std::to_string(m.head_size()) +
           " is odd";
  if (m.heads % m.kv_head_count())
    return "heads " + std::to_string(m.heads) + " are not a multiple of kv_heads " + std::to_string(m.kv_head_count());
  return "";
}

std::string engine_split_problem(const ModelSpec& m, const Grid& g) {
  auto s = [](long long v) { return std::to_string(v); };
  if (std::string why = engine_model_problem(m); !why.empty()) return why;
  if (!m.head_dim && m.hidden % m.heads) return "hidden " + s(m.hidden) + " is not a multiple of heads " + s(m.heads);
  if (m.layers % g.p) return "layers " + s(m.layers) + " % stages " + s(g.p) + " != 0 (each stage holds whole blocks)";
  if (m.hidden % g.x) return "hidden " + s(m.hidden) + " % G_x " + s(g.x) + " != 0";
  if (m.heads % g.y) return "heads " + s(m.heads) + " % G_y " + s(g.y) + " != 0 (each Y rank owns whole heads)";
  if (m.kv_head_count() % g.y)
    return "KV heads " + s(m.kv_head_count()) + " % G_y " + s(g.y) + " != 0 (each Y rank owns whole KV heads)";
  if (m.ffn % g.y) return "ffn " + s(m.ffn) + " % G_y " + s(g.y) + " != 0";
  if (m.padded_vocab % g.y) return "padded vocabulary " + s(m.padded_vocab) + " % G_y " + s(g.y) + " != 0";
  std::vector<LinearLayer> weights{{"embedding", double(m.padded_vocab), double(m.hidden), true}, lm_head(m)};
  for (const LinearLayer& l : block_layers(m)) weights.push_back(l);
  for (const LinearLayer& w : weights) {
    const double block = (w.k / (w.transposed ? g.y : g.x)) * (w.n / (w.transposed ? g.x : g.y));
    if (std::fmod(block, g.z) != 0)
      return std::string(w.name) + " block of " + s((long long)block) + " values % G_z " + s(g.z) + " != 0";
  }
  return "";
}

std::array<LinearLayer, kBlockLayers> block_layers(const ModelSpec& m) {
  // QKV: a Y block holds its A/G_y query heads and the A_kv/G_y KV heads they
  // read. SwiGLU's gate and up are one H → 2F layer whose Y block holds
  // matching columns of each (MODEL.md §12).
  const double H = m.hidden, F = m.ffn, dh = m.head_size(), A = m.heads, Akv = m.kv_head_count();
  return {LinearLayer{"qkv", H, (A + 2 * Akv) * dh, false}, LinearLayer{"attn_out", A * dh, H, true},
          LinearLayer{"fc1", H, (m.mlp == Mlp::SwiGlu ? 2 : 1) * F, false}, LinearLayer{"fc2", F, H, true}};
}

LinearLayer lm_head(const ModelSpec& m) { return {"lm_head", double(m.hidden), double(m.padded_vocab), false}; }

LocalWeight local_weight(const LinearLayer& l, const Grid& g) {
  LocalWeight w;
  w.k_local = l.k / (l.transposed ? g.y : g.x);
  w.n_local = l.n / (l.transposed ? g.x : g.y);
  w.shard = std::ceil(w.k_local * w.n_local / g.z);
  w.gathered = w.shard * g.z;
  return w;
}

Stage stage_of(const ModelSpec& m, const Grid& g, int index) {
  return Stage{index, m.layers / g.p, index == 0, index == g.p - 1};
}

StageKinds distinct_stages(const ModelSpec& m, const Grid& g) {
  StageKinds k;
  k.stages = g.p;
  auto add = [&](int index, int copies) {
    k.stage[k.count] = stage_of(m, g, index);
    k.copies[k.count++] = copies;
  };
  add(0, 1);
  if (g.p > 2) add(1, g.p - 2);
  if (g.p > 1) add(g.p - 1, 1);
  return k;
}

LocalParams local_params(const ModelSpec& m, const Grid& g, const Stage& s) {
  LocalParams p;
  // The embedding's cell block is Vp/G_y × H/G_x, laid out like the LM head.
  const LinearLayer ends[] = {lm_head(m), LinearLayer{"embedding", double(m.hidden), double(m.padded_vocab), false}};
  for (const LinearLayer& l : ends) {
    if (&l == &ends[0] ? !s.last : !s.first) continue;
    // Tied, a stage holding both keeps one; the last of several keeps a copy.
    if (&l == &ends[0] && m.tied_embeddings && s.first) continue;
    LocalWeight w = local_weight(l, g);
    p.sharded += w.shard;
    p.largest_block = std::max(p.largest_block, w.gathered);
  }
  for (const LinearLayer& l : block_layers(m)) {
    LocalWeight w = local_weight(l, g);
    p.sharded += s.blocks * w.shard;
    p.largest_block = std::max(p.largest_block, w.gathered);
  }
  const auto layers = block_layers(m);
  const double hx = double(m.hidden) / g.x;
  const double norm = (m.norm == Norm::LayerNorm ? 2 : 1) * hx;  // γ and β, or γ alone
  double per_block = 2 * norm;
  // Biases on each layer's output split: QKV and FC1 over Y, the
  // transposed attention-out and FC2 over X.
  if (m.qkv_bias) per_block += layers[0].n / g.y;
  if (m.bias) per_block += hx + layers[2].n / g.y + hx;
  p.replicated = s.blocks * per_block + (s.last ? norm : 0) +
                 (s.first && m.positions == Positions::Learned ? double(m.seq_len) * hx : 0);  // final norm, positions
  return p;
}

}  // namespace ff
