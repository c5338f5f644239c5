#include "advisor/core/job.hpp"

#include <algorithm>
#include <cmath>

#include "advisor/core/error.hpp"

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
  if (std::string why = stage_layers_problem(m, g.p, job.stage_layers); !why.empty()) return "--stage-layers: " + why;
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
  if (g.p > m.layers) return "stages " + s(g.p) + " > layers " + s(m.layers) + " (a stage holds at least one block)";
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

std::vector<int> stage_blocks(const ModelSpec& m, int P, const std::vector<int>& pinned) {
  if (!pinned.empty()) return pinned;
  const int L = m.layers;
  if (P <= 1) return {L};
  if (L % P == 0) return std::vector<int>(size_t(P), L / P);
  // Forward FLOPs per token: a block's GEMMs and attention, the head's GEMM;
  // the head costs `head` blocks. The last stage takes b blocks, the other
  // P − 1 share the rest as evenly as blocks allow (the larger runs first).
  // The least most-loaded stage wins; on a tie the larger b.
  const double block = 2 * m.block_matmul_params() + 4.0 * m.seq_len * m.attention_width();
  const double head = 2.0 * m.hidden * m.padded_vocab / block;
  int best_last = 1;
  double best = 1e300;
  for (int b = L - (P - 1); b >= 1; --b) {
    const int others = (L - b + P - 2) / (P - 1);  // the largest of the others
    const double cost = std::max(double(others), b + head);
    if (cost < best - 1e-9) best = cost, best_last = b;
  }
  std::vector<int> out(static_cast<size_t>(P), 0);
  const int rest = L - best_last, q = rest / (P - 1), r = rest % (P - 1);
  for (int i = 0; i < P - 1; ++i) out[size_t(i)] = q + (i < r ? 1 : 0);
  out.back() = best_last;
  return out;
}

std::string virtual_stages_problem(const Job& job, const Grid& g, int mb, int v) {
  if (v == 1) return "";
  auto s = [](long long x) { return std::to_string(x); };
  if (v < 1) return "--virtual-stages " + s(v) + ": expected model chunks per stage >= 1";
  if (g.p < 2) return "--virtual-stages " + s(v) + " interleaves pipeline stages, and the grid has none";
  if (!job.stage_layers.empty()) return "--virtual-stages with --stage-layers: interleaved chunks are equal runs";
  if (job.model.layers % (g.p * v))
    return "--virtual-stages " + s(v) + ": layers " + s(job.model.layers) + " are not divisible by G_pipe·v = " +
           s(g.p * v) + " (equal chunks, Megatron's rule)";
  const long long M = job.batch / (1LL * mb * g.z * g.d);
  if (M % g.p)
    return "--virtual-stages " + s(v) + ": " + s(M) + " micro-batches per pipeline are not a multiple of G_pipe = " +
           s(g.p) + " (Megatron's rule for the interleaved schedule)";
  return "";
}

std::string sequence_parallel_problem(const ModelSpec& m, const Grid& g, int mb) {
  if (g.y == 1) return "sequence parallelism splits the sequence over Y: grid " + g.label() + " has G_y = 1";
  if ((1LL * mb * m.seq_len) % g.y)
    return "sequence parallelism: micro-batch " + std::to_string(mb) + " × " + std::to_string(m.seq_len) +
           " tokens do not divide over G_y = " + std::to_string(g.y);
  return "";
}

std::string stage_layers_problem(const ModelSpec& m, int P, const std::vector<int>& pinned) {
  if (pinned.empty()) return "";
  auto s = [](long long v) { return std::to_string(v); };
  if (int(pinned.size()) != P)
    return s(long(pinned.size())) + " stages' blocks given for " + s(P) + " pipeline stages";
  long long sum = 0;
  for (int b : pinned) {
    if (b < 1) return "a stage holds at least one block, not " + s(b);
    sum += b;
  }
  if (sum != m.layers) return "the stages' blocks add up to " + s(sum) + ", not the model's " + s(m.layers) + " layers";
  // Stages of one run length cost the same and are priced once (distinct_stages).
  std::vector<int> middle(pinned.begin() + (P > 1), pinned.end() - (P > 1));
  std::sort(middle.begin(), middle.end());
  const long kinds = long(std::unique(middle.begin(), middle.end()) - middle.begin()) + (P > 1 ? 2 : 1) - (P == 1);
  if (kinds > kMaxStageKinds)
    return s(kinds) + " kinds of stage (the first, the last, and each run length between): at most " +
           s(kMaxStageKinds) + " are priced";
  return "";
}

std::vector<Stage> stages_of(const Job& job, const Grid& g) {
  const std::vector<int> blocks = stage_blocks(job.model, g.p, job.stage_layers);
  std::vector<Stage> out;
  int first_block = 0;
  for (int i = 0; i < g.p; ++i) {
    out.push_back(Stage{i, blocks[size_t(i)], i == 0, i == g.p - 1, first_block});
    first_block += blocks[size_t(i)];
  }
  return out;
}

Stage stage_of(const Job& job, const Grid& g, int index) { return stages_of(job, g)[size_t(index)]; }

StageKinds distinct_stages(const Job& job, const Grid& g) {
  StageKinds k;
  k.stages = g.p;
  k.each = stages_of(job, g);
  for (const Stage& s : k.each) {
    int found = -1;
    for (int j = 0; j < k.count && found < 0; ++j)
      if (k.stage[j].blocks == s.blocks && k.stage[j].first == s.first && k.stage[j].last == s.last) found = j;
    if (found < 0) {
      if (k.count == kMaxStageKinds)
        input_error("the stages' blocks make more than " + std::to_string(kMaxStageKinds) +
                    " kinds of stage (different block counts); pin fewer distinct runs with --stage-layers");
      found = k.count++;
      k.stage[found] = s;
    }
    ++k.copies[found];
    k.kind.push_back(found);
  }
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
