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

}  // namespace ff
