#include "engine/params.hpp"

#include <algorithm>
#include <cmath>

#include "advisor/core/error.hpp"
#include "advisor/core/job.hpp"

namespace ff::engine {

void check_divisible(const ModelSpec& m, const Grid& g) {
  // One rule for the engine and `advisor validate`, which must not launch a
  // run the engine refuses.
  if (std::string why = engine_split_problem(m, g); !why.empty()) input_error("grid cannot divide the model: " + why);
}

ParamLayout param_layout(const ModelSpec& m, const Grid& g, int stage, const std::vector<int>& stage_layers,
                         int virtual_stages) {
  check_divisible(m, g);
  if (std::string why = stage_layers_problem(m, g.p, stage_layers); !why.empty()) input_error("--stage-layers: " + why);
  ParamLayout L;
  const std::vector<int> blocks = stage_blocks(m, g.p, stage_layers);
  const int per_stage = blocks[size_t(stage)];
  L.stage = stage;
  L.first = stage == 0;
  L.last = stage == g.p - 1;
  L.first_layer = 0;
  for (int i = 0; i < stage; ++i) L.first_layer += blocks[size_t(i)];
  // Interleaved: block l is in virtual stage l / n, on stage (l / n) mod P.
  L.chunks = virtual_stages;
  const int chunk_blocks = m.layers / (g.p * virtual_stages);
  auto holds = [&](int l) {
    if (virtual_stages == 1) return l >= L.first_layer && l < L.first_layer + per_stage;
    return (l / chunk_blocks) % g.p == stage;
  };
  if (virtual_stages > 1) L.first_layer = stage * chunk_blocks;
  bool keep = true;  // whether the parameters being declared are this stage's
  const long H = m.hidden, F = m.ffn, Vp = m.padded_vocab, S = m.seq_len;
  const long dh = m.head_size(), Aq = long(m.heads) * dh, Akv = long(m.kv_head_count()) * dh;
  const std::vector<long> qkv_parts{Aq, Akv, Akv};
  const bool swiglu = m.mlp == Mlp::SwiGlu, layernorm = m.norm == Norm::LayerNorm;
  const std::vector<long> mlp_parts = swiglu ? std::vector<long>{F, F} : std::vector<long>{};
  const long mlp_in = swiglu ? 2 * F : F;
  const double resid_std = 0.02 / std::sqrt(2.0 * m.layers);  // GPT-2: residual projections scaled by depth
  int id = 0;

  auto matrix = [&](std::string name, long rows, long cols, bool transposed, std::vector<long> parts, double std,
                    int with_id = -1) {
    if (!keep) {
      if (with_id < 0) ++id;
      return -1;
    }
    MatrixParam p;
    p.name = std::move(name);
    p.id = with_id < 0 ? id++ : with_id;
    p.rows = rows, p.cols = cols, p.transposed = transposed, p.parts = std::move(parts), p.init_std = std;
    p.block_rows = rows / (transposed ? g.y : g.x);
    p.block_cols = cols / (transposed ? g.x : g.y);
    p.shard_n = p.block_n() / g.z;
    p.offset = L.shard_total;
    L.shard_total += p.shard_n;
    L.largest_block = std::max(L.largest_block, p.block_n());
    L.matrices.push_back(p);
    return int(L.matrices.size()) - 1;
  };
  // Absent (`present` false): neither declared nor given an id.
  auto vector = [&](bool present, std::string name, long rows, long cols, Axis split, std::vector<long> parts,
                    VectorParam::Init init, double std = 0) {
    if (!present) return -1;
    if (!keep) return ++id, -1;
    VectorParam p;
    p.name = std::move(name);
    p.id = id++;
    p.rows = rows, p.cols = cols, p.split = split, p.parts = std::move(parts), p.init = init, p.init_std = std;
    p.local_cols = cols / g.size(split);
    p.n = size_t(rows) * p.local_cols;
    p.offset = L.vector_total;
    L.vector_total += p.n;
    L.vectors.push_back(p);
    return int(L.vectors.size()) - 1;
  };
  using I = VectorParam::Init;

  keep = L.first;
  const int embedding_id = id;
  L.embedding = matrix("embedding", Vp, H, true, {}, 0.02);
  L.tied = m.tied_embeddings;
  if (L.tied && L.last && !L.first) {
    // The copy first in the last stage's arena: its gradient is final only
    // once the first stage's has been added (end_step), so the buckets above
    // it can be reduced over D as backward completes them.
    keep = true;
    L.tied_copy = L.lm_head = matrix("embedding", Vp, H, true, {}, 0.02, embedding_id);
  }
  keep = L.first;
  L.positions = vector(m.positions == Positions::Learned, "positions", S, H, Axis::X, {}, I::Normal, 0.01);
  for (int l = 0; l < m.layers; ++l) {
    keep = holds(l);
    std::string b = "block" + std::to_string(l) + ".";
    BlockParams bp;
    bp.ln1_g = vector(true, b + "ln1.weight", 1, H, Axis::X, {}, I::One);
    bp.ln1_b = vector(layernorm, b + "ln1.bias", 1, H, Axis::X, {}, I::Zero);
    bp.qkv = matrix(b + "qkv.weight", H, Aq + 2 * Akv, false, qkv_parts, 0.02);
    bp.qkv_b = vector(m.qkv_bias, b + "qkv.bias", 1, Aq + 2 * Akv, Axis::Y, qkv_parts, I::Zero);
    bp.out = matrix(b + "attn_out.weight", Aq, H, true, {}, resid_std);
    bp.out_b = vector(m.bias, b + "attn_out.bias", 1, H, Axis::X, {}, I::Zero);
    bp.ln2_g = vector(true, b + "ln2.weight", 1, H, Axis::X, {}, I::One);
    bp.ln2_b = vector(layernorm, b + "ln2.bias", 1, H, Axis::X, {}, I::Zero);
    bp.fc1 = matrix(b + (swiglu ? "gate_up.weight" : "fc1.weight"), H, mlp_in, false, mlp_parts, 0.02);
    bp.fc1_b = vector(m.bias, b + (swiglu ? "gate_up.bias" : "fc1.bias"), 1, mlp_in, Axis::Y, mlp_parts, I::Zero);
    bp.fc2 = matrix(b + "fc2.weight", F, H, true, {}, resid_std);
    bp.fc2_b = vector(m.bias, b + "fc2.bias", 1, H, Axis::X, {}, I::Zero);
    if (keep) L.blocks.push_back(bp);
  }
  keep = L.last;
  L.lnf_g = vector(true, "ln_f.weight", 1, H, Axis::X, {}, I::One);
  L.lnf_b = vector(layernorm, "ln_f.bias", 1, H, Axis::X, {}, I::Zero);
  if (!L.tied) L.lm_head = matrix("lm_head.weight", H, Vp, false, {}, 0.02);
  else if (L.first && L.last) L.lm_head = L.embedding;
  return L;
}

long logical_col(const std::vector<long>& parts, long cols, long block_cols, int b, long lc) {
  if (parts.empty()) return b * block_cols + lc;
  // Block b holds, in order, its slice of each group.
  long start = 0;
  for (long width : parts) {
    const long local = width * block_cols / cols;
    if (lc < local) return start + b * local + lc;
    lc -= local;
    start += width;
  }
  return -1;  // unreachable: the parts sum to cols
}

void matrix_element(const MatrixParam& p, const Coords& c, size_t i, long& row, long& col) {
  int rb = p.transposed ? c[int(Axis::Y)] : c[int(Axis::X)];
  int cb = p.transposed ? c[int(Axis::X)] : c[int(Axis::Y)];
  size_t f = size_t(c[int(Axis::Z)]) * p.shard_n + i;
  row = rb * p.block_rows + long(f / p.block_cols);
  col = logical_col(p.parts, p.cols, p.block_cols, cb, long(f % p.block_cols));
}

void block_origin(const MatrixParam& p, const Coords& c, long& row0, std::vector<long>& cols) {
  int rb = p.transposed ? c[int(Axis::Y)] : c[int(Axis::X)];
  int cb = p.transposed ? c[int(Axis::X)] : c[int(Axis::Y)];
  row0 = rb * p.block_rows;
  cols.resize(size_t(p.block_cols));
  for (long lc = 0; lc < p.block_cols; ++lc) cols[size_t(lc)] = logical_col(p.parts, p.cols, p.block_cols, cb, lc);
}

void vector_element(const VectorParam& p, const Coords& c, size_t i, long& row, long& col) {
  row = long(i / p.local_cols);
  col = logical_col(p.parts, p.cols, p.local_cols, c[int(p.split)], long(i % p.local_cols));
}

bool owns_matrix(const Coords& c) { return c[int(Axis::D)] == 0; }

bool owns_vector(const VectorParam& p, const Coords& c) {
  Axis other = p.split == Axis::X ? Axis::Y : Axis::X;
  return c[int(other)] == 0 && c[int(Axis::Z)] == 0 && c[int(Axis::D)] == 0;
}

}  // namespace ff::engine
