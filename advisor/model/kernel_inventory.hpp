#pragma once
// The kernels a GPU step runs (MODEL.md §2, "Kernels"): each of compute's
// terms belongs to a kernel class and takes a number of launches; the
// memory-bound ones move the bytes a framework at a stated fusion level
// really moves. GEMMs and attention are priced by their rates (one launch
// each way, however the library splits it); this header is the rest.
#include <array>
#include <cstdint>

#include "advisor/core/fusion.hpp"
#include "advisor/core/kernel_class.hpp"
#include "advisor/core/model_spec.hpp"

namespace ff {


// Memory-bound kernels: bytes moved and launches, per occurrence.
struct MemoryKernels {
  double bytes = 0;
  double launches = 0;
};

// One block's memory-bound kernels on a rank that holds t tokens, a hidden
// slice of hx (one of G_x = gx), an FFN slice of fy, qk values of queries
// and keys per token (RoPE rotates them; 0 without), and linear layers whose
// biases span bias_columns output columns each (MODEL.md §1 order: qkv,
// attn_out, fc1, fc2; 0: no bias), b bytes an element; `whole`: the layers
// whose output is whole after their GEMM (no partial sums over its axis,
// which has one rank), so that the engine adds the bias, and GELU after
// FC1, in the GEMM's epilogue. Per occurrence: each of the two norms and the
// two residual adds; the activation, the rotation, and the biases of all
// four linears together once. bias_in_gemm: the layers whose forward bias
// is in their GEMM at this level (no launch of its own).
struct BlockKernels {
  MemoryKernels norm_fwd, norm_bwd, residual_fwd, residual_bwd, act_fwd, act_bwd, bias_fwd, bias_bwd, rope_fwd,
      rope_bwd;
  std::array<bool, 4> bias_in_gemm{};
};
BlockKernels block_kernels(Fusion f, const ModelSpec& m, double t, double hx, int gx, double fy, double qk,
                           const std::array<double, 4>& bias_columns, const std::array<bool, 4>& whole, int b);

// The block's edges: the embedding's lookup (with learned positions) and its
// gradient's scatter-add on [t, hx]; the loss over a vocabulary slice vy in
// fp32 (forward softmax, backward gradient). The gradient accumulation and
// the optimizer are one kernel each at every level.
struct EdgeKernels {
  MemoryKernels embedding_fwd, embedding_bwd, loss_fwd, loss_bwd;
};
EdgeKernels edge_kernels(Fusion f, const ModelSpec& m, double t, double hx, double vy, int b);

}  // namespace ff
