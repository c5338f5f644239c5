#include "advisor/model/kernel_inventory.hpp"

namespace ff {

BlockKernels block_kernels(Fusion f, const ModelSpec& m, double t, double hx, int gx, double fy, double qk,
                           const std::array<double, 4>& bias_columns, const std::array<bool, 4>& whole, int b) {
  BlockKernels k;
  // Bytes are the same at every level but the biases' (and the engine's
  // GELU in FC1's epilogue and x̂, below): a norm reads x and
  // writes y (its statistics stay on chip), and its backward reads dy and
  // x and writes dx; a residual add reads two and writes one, both ways;
  // GELU reads and writes forward and reads two, writes one backward;
  // SwiGLU reads gate and up and writes their product, and backward reads
  // the two and the gradient and writes two. Fusing bias into GELU or the
  // residual changes launches, not passes.
  // The engine on a row split over X (G_x > 1), around the all-reduces:
  // LayerNorm's sums, centred squares, normalise; RMSNorm's squares,
  // normalise; backward the sums, then dx with the weight (and bias)
  // gradients. On whole rows, one fused kernel forward; backward dx with the
  // chunks' partial gradients, then the chunks added (the same 2).
  const bool rms = m.norm == Norm::RmsNorm, split = gx > 1;
  // The engine's fused forward also writes x̂, which its backward reads in
  // place of x.
  const bool engine_rows = f == Fusion::Engine && !split;
  k.norm_fwd = {(engine_rows ? 3 : 2) * t * hx * b, f == Fusion::Engine && split ? (rms ? 2.0 : 3.0) : 1.0};
  k.norm_bwd = {3 * t * hx * b, f == Fusion::Engine && !split ? double(kFusedNormBackwardKernels) : 2.0};
  k.residual_fwd = {3 * t * hx * b, 1};
  k.residual_bwd = {3 * t * hx * b, 1};
  const bool glu = m.mlp == Mlp::SwiGlu;
  k.act_fwd = {(glu ? 3 : 2) * t * fy * b, 1};
  k.act_bwd = {(glu ? 5 : 3) * t * fy * b, 1};
  // RoPE rotates queries and keys in place each way: read and write them,
  // one kernel for each fused, PyTorch's rotate-half as six ops each; the
  // engine turns both in one kernel.
  if (qk > 0)
    k.rope_fwd = k.rope_bwd = {2 * t * qk * b, f == Fusion::Unfused ? 12.0 : f == Fusion::Engine ? 1.0 : 2.0};
  double columns = 0, biased = 0, apart = 0;
  for (int j = 0; j < 4; ++j) {
    columns += bias_columns[j], biased += bias_columns[j] > 0;
    const bool in_gemm = bias_columns[j] > 0 && (f == Fusion::Fused || (f == Fusion::Engine && whole[j]));
    k.bias_in_gemm[j] = in_gemm;
    apart += bias_columns[j] > 0 && !in_gemm;
  }
  switch (f) {
    case Fusion::Unfused:
      // Each bias added in a pass of its own (read and write [t, n]) and its
      // gradient a column sum (read [t, n]).
      k.bias_fwd = {2 * t * columns * b, biased};
      k.bias_bwd = {t * columns * b, biased};
      break;
    case Fusion::Fused: break;  // GEMM epilogues: no pass, no launch
    case Fusion::Engine:
      // cuBLASLt's epilogue where the output is whole after the GEMM; else
      // (its partial sums reduced first) a kernel of its own, charged as the
      // epilogue it stands for. Backward, column sums of their own: each
      // bias's output gradient read once.
      k.bias_fwd = {0, apart};
      k.bias_bwd = {t * columns * b, biased};
      // GELU in FC1's epilogue with its bias: no launch; the GEMM writes
      // GELU's output besides its input, where a kernel of its own read that
      // input and wrote the output.
      if (!glu && k.bias_in_gemm[2]) k.act_fwd = {t * fy * b, 0};
      break;
  }
  return k;
}

EdgeKernels edge_kernels(Fusion f, const ModelSpec& m, double t, double hx, double vy, int b) {
  EdgeKernels k;
  // Lookup (read the rows, write [t, hx]) and learned positions added (a
  // third pass, and a launch); backward the same passes.
  const bool learned = m.positions == Positions::Learned;
  const double emb = (learned ? 3 : 2) * t * hx * b, loss = 2 * t * vy * 4, positions = learned;
  // Token and position lookups and an add; the gradient's scatter-adds. The
  // engine looks up, then adds positions (where learned), and scatters once.
  k.embedding_fwd = {emb, f == Fusion::Engine ? 1 + positions : 2 + positions};
  k.embedding_bwd = {emb, f == Fusion::Engine ? 1.0 : 1 + positions};
  // The loss fused: row maxima, then exp-sums forward, the gradient backward;
  // as PyTorch's vocabulary-parallel ops: max, subtract, exp, sum, log,
  // gather, ... then softmax minus one-hot and scale.
  const bool ops = f == Fusion::Unfused;
  k.loss_fwd = {loss, ops ? 8.0 : 2.0};
  k.loss_bwd = {loss, ops ? 3.0 : 1.0};
  return k;
}

}  // namespace ff
