#pragma once
// Where every parameter lives on a rank (MODEL.md §1): matrices as the Z shard
// of their grid cell's block, replicated vectors as their X or Y slice. Maps
// each local value to its logical (row, column) so initialisation and
// comparisons use one canonical layout whatever the grid.
#include <cstddef>
#include <string>
#include <vector>

#include "advisor/core/grid.hpp"
#include "advisor/core/model_spec.hpp"

namespace ff::engine {

// A matrix [rows, cols] (input × output). Normal: rows split over X, columns
// over Y; transposed: the reverse. The cell's block, flattened row-major, is
// split into G_z equal shards.
struct MatrixParam {
  std::string name;
  int id = 0;
  long rows = 0, cols = 0;
  bool transposed = false;
  // Column groups stored block by block: block b holds, in order, its slice
  // of each group ([Q|K|V] by whole heads; SwiGLU's [gate|up]). Empty: one.
  std::vector<long> parts;
  double init_std = 0.02;
  long block_rows = 0, block_cols = 0;
  size_t shard_n = 0;
  size_t offset = 0;  // into the rank's shard arena
  size_t block_n() const { return size_t(block_rows) * size_t(block_cols); }
};

// A replicated parameter [rows, cols], columns split over `split` (X or Y),
// replicated over the other axes.
struct VectorParam {
  enum class Init { Zero, One, Normal };
  std::string name;
  int id = 0;
  long rows = 1, cols = 0;
  Axis split = Axis::X;
  std::vector<long> parts;  // as MatrixParam's
  Init init = Init::Zero;
  double init_std = 0;
  long local_cols = 0;
  size_t n = 0;
  size_t offset = 0;  // into the rank's replicated arena
};

// Absent parameters (biases of a bias-free model, RMSNorm's β) are -1.
struct BlockParams {
  int ln1_g, ln1_b, qkv_b, out_b, ln2_g, ln2_b, fc1_b, fc2_b;  // VectorParam indices
  int qkv, out, fc1, fc2;                                      // MatrixParam indices; fc1 is [gate|up] for SwiGLU
};

// One pipeline stage's parameters (MODEL.md §9): its contiguous run of blocks,
// the embedding and positions on the first stage, the final LayerNorm and LM
// head on the last. Ids (which key the initialisation) are the whole
// model's, so a parameter has the same values whichever stage holds it;
// absent parameters' indices are -1. Tied embeddings (MODEL.md §12): the
// head is the embedding's block read transposed; lm_head is the embedding
// itself on one stage, and with stages the last holds a copy (`tied_copy`,
// the embedding's id, first in its arena) whose gradient it sums with the
// first stage's, as Megatron's embedding group does. Interleaved (MODEL.md §9,
// `chunks` = v > 1): the stage holds v runs of L/(P·v) blocks, chunk c being
// virtual stage c·P + stage, in layer order, so that backward's last chunk
// to finish (chunk 0) is at the bottom of the arena, as a single run's first
// block is; `blocks` holds them chunk after chunk.
struct ParamLayout {
  int stage = 0, first_layer = 0;
  int chunks = 1;
  bool first = true, last = true;
  std::vector<MatrixParam> matrices;  // in forward order: embedding, blocks, LM head
  std::vector<VectorParam> vectors;
  std::vector<BlockParams> blocks;
  int embedding = -1, lm_head = -1, positions = -1, lnf_g = -1, lnf_b = -1;
  bool tied = false;   // lm_head is stored as the embedding, [Vp, H]
  int tied_copy = -1;  // the last stage's copy of the embedding (stages only)
  size_t shard_total = 0, vector_total = 0;
  size_t largest_block = 0;
};

// Throws InputError when the grid cannot divide the model (MODEL.md §2's list,
// without padding).
void check_divisible(const ModelSpec& m, const Grid& g);
// `stage_layers`: each stage's blocks, pinned; empty: stage_blocks' own (job.hpp).
// `virtual_stages` v > 1: the interleaved chunks (the caller has checked
// virtual_stages_problem).
ParamLayout param_layout(const ModelSpec& m, const Grid& g, int stage = 0, const std::vector<int>& stage_layers = {},
                         int virtual_stages = 1);

// Logical column of local column `lc` in column block `b` of `block_cols`.
long logical_col(const std::vector<long>& parts, long cols, long block_cols, int b, long lc);

// Logical (row, col) of element i of the rank's shard of `p`.
void matrix_element(const MatrixParam& p, const Coords& c, size_t i, long& row, long& col);
void vector_element(const VectorParam& p, const Coords& c, size_t i, long& row, long& col);
// matrix_element by rows: element f of the cell's block (f = G_z-coordinate ·
// shard_n + i) is at logical row row0 + f / block_cols, logical column
// cols[f % block_cols].
void block_origin(const MatrixParam& p, const Coords& c, long& row0, std::vector<long>& cols);

// Whether this rank is the one that reports a value (gradient norm,
// canonical gather): shards by the D = 0 replica; a replicated vector by
// coordinate 0 on every axis it is replicated over.
bool owns_matrix(const Coords& c);
bool owns_vector(const VectorParam& p, const Coords& c);

}  // namespace ff::engine
