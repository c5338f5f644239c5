#pragma once
// The classes of kernel a GPU step runs (MODEL.md §2, "Kernels"): the
// advisor prices each compute term as one of them, and the engine counts
// (and under --profile-kernels times) its launches by the same names, so the
// two can be held against each other class by class.
#include <cstdint>

namespace ff {

enum class KernelClass : uint8_t {
  Gemm, Attention, Norm, Activation, Residual, Bias, Rope, Embedding, CrossEntropy, Accumulate, Optimizer,
  LaunchBound,  // the advisor's wait for the host to issue launches: no kernel
  Copy,         // the engine's glue (stage and recompute copies, gradient-dtype rounding): no advisor term
};
inline constexpr int kKernelClasses = int(KernelClass::Copy) + 1;
const char* kernel_class_name(KernelClass c);

// A norm's backward on whole rows (G_x = 1) is one launch of the engine's
// but two GPU kernels: the rows' dx with each chunk of rows' partial column
// sums for dγ (dβ), then the chunks added in order (no atomics: a rerun is
// bitwise the same). The engine says so; the advisor counts it.
inline constexpr int kFusedNormBackwardKernels = 2;

}  // namespace ff
