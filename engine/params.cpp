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

ParamLayout param_layout(const ModelSpec& m, const Grid& g, int stage) {
  check_divisible(m, g);
  ParamLayout L;
  const int per_stage = m.layers / g.p;
  L.stage = stage;
  L.first = stage == 0;
  L.last = stage == g.p - 1;
  L.first_layer = stage * per_stage;
  bool keep = true;  // whether the parameters being declared are this stage's
  const long H = m.hidden, F = m.ffn, Vp = m.padded_vocab, S = m.seq_len;
  const double resid_std = 0.02 / std::sqrt(2.0 * m.layers);  // GPT-2: residual projections scaled by depth
  int id = 0;

  auto matrix = [&](std::string name, long rows, long cols, bool transposed, bool qkv, double std) {
    if (!keep) return ++id, -1;
    MatrixParam p;
    p.name = std::move(name);
    p.id = id++;
    p.rows = rows, p.cols = cols, p.transposed = transposed, p.qkv = qkv, p.init_std = std;
    p.block_rows = rows / (transposed ? g.y : g.x);
    p.block_cols = cols / (transposed ? g.x : g.y);
    p.shard_n = p.block_n() / g.z;
    p.offset = L.shard_total;
    L.shard_total += p.shard_n;
    L.largest_block = std::max(L.largest_block, p.block_n());
    L.matrices.push_back(p);
    return int(L.matrices.size()) - 1;
  };
  auto vector = [&](std::string name, long rows, long cols, Axis split, bool qkv, VectorParam::Init init,
                    double std = 0) {
    if (!keep) return ++id, -1;
    VectorParam p;
    p.name = std::move(name);
    p.id = id++;
    p.rows = rows, p.cols = cols, p.split = split, p.qkv = qkv, p.init = init, p.init_std = std;
    p.local_cols = cols / g.size(split);
    p.n = size_t(rows) * p.local_cols;
    p.offset = L.vector_total;
    L.vector_total += p.n;
    L.vectors.push_back(p);
    return int(L.vectors.size()) - 1;
  };
  using I = VectorParam::Init;

  keep = L.first;
  L.embedding = matrix("embedding", Vp, H, true, false, 0.02);
  L.positions = vector("positions", S, H, Axis::X, false, I::Normal, 0.01);
  for (int l = 0; l < m.layers; ++l) {
    keep = l >= L.first_layer && l < L.first_layer + per_stage;
    std::string b = "block" + std::to_string(l) + ".";
    BlockParams bp;
    bp.ln1_g = vector(b + "ln1.weight", 1, H, Axis::X, false, I::One);
    bp.ln1_b = vector(b + "ln1.bias", 1, H, Axis::X, false, I::Zero);
    bp.qkv = matrix(b + "qkv.weight", H, 3 * H, false, true, 0.02);
    bp.qkv_b = vector(b + "qkv.bias", 1, 3 * H, Axis::Y, true, I::Zero);
    bp.out = matrix(b + "attn_out.weight", H, H, true, false, resid_std);
    bp.out_b = vector(b + "attn_out.bias", 1, H, Axis::X, false, I::Zero);
    bp.ln2_g = vector(b + "ln2.weight", 1, H, Axis::X, false, I::One);
    bp.ln2_b = vector(b + "ln2.bias", 1, H, Axis::X, false, I::Zero);
    bp.fc1 = matrix(b + "fc1.weight", H, F, false, false, 0.02);
    bp.fc1_b = vector(b + "fc1.bias", 1, F, Axis::Y, false, I::Zero);
    bp.fc2 = matrix(b + "fc2.weight", F, H, true, false, resid_std);
    bp.fc2_b = vector(b + "fc2.bias", 1, H, Axis::X, false, I::Zero);
    if (keep) L.blocks.push_back(bp);
  }
  keep = L.last;
  L.lnf_g = vector("ln_f.weight", 1, H, Axis::X, false, I::One);
  L.lnf_b = vector("ln_f.bias", 1, H, Axis::X, false, I::Zero);
  L.lm_head = matrix("lm_head.weight", H, Vp, false, false, 0.02);
  return L;
}

long logical_col(bool qkv, long cols, long block_cols, int b, long lc) {
  if (!qkv) return b * block_cols + lc;
  // Block b holds, in order, its heads' Q, K and V columns.
  long part = block_cols / 3;
  return (lc / part) * (cols / 3) + b * part + lc % part;
}

void matrix_element(const MatrixParam& p, const Coords& c, size_t i, long& row, long& col) {
  int rb = p.transposed ? c[int(Axis::Y)] : c[int(Axis::X)];
  int cb = p.transposed ? c[int(Axis::X)] : c[int(Axis::Y)];
  size_t f = size_t(c[int(Axis::Z)]) * p.shard_n + i;
  row = rb * p.block_rows + long(f / p.block_cols);
  col = logical_col(p.qkv, p.cols, p.block_cols, cb, long(f % p.block_cols));
}

void block_origin(const MatrixParam& p, const Coords& c, long& row0, std::vector<long>& cols) {
  int rb = p.transposed ? c[int(Axis::Y)] : c[int(Axis::X)];
  int cb = p.transposed ? c[int(Axis::X)] : c[int(Axis::Y)];
  row0 = rb * p.block_rows;
  cols.resize(size_t(p.block_cols));
  for (long lc = 0; lc < p.block_cols; ++lc) cols[size_t(lc)] = logical_col(p.qkv, p.cols, p.block_cols, cb, lc);
}

void vector_element(const VectorParam& p, const Coords& c, size_t i, long& row, long& col) {
  row = long(i / p.local_cols);
  col = logical_col(p.qkv, p.cols, p.local_cols, c[int(p.split)], long(i % p.local_cols));
}

bool owns_matrix(const Coords& c) { return c[int(Axis::D)] == 0; }

bool owns_vector(const VectorParam& p, const Coords& c) {
  Axis other = p.split == Axis::X ? Axis::Y : Axis::X;
  return c[int(other)] == 0 && c[int(Axis::Z)] == 0 && c[int(Axis::D)] == 0;
}

}  // namespace ff::engine
