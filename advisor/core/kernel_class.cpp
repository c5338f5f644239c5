#include "advisor/core/kernel_class.hpp"

namespace ff {

const char* kernel_class_name(KernelClass c) {
  switch (c) {
    case KernelClass::Gemm: return "gemm";
    case KernelClass::Attention: return "attention";
    case KernelClass::Norm: return "norm";
    case KernelClass::Activation: return "activation";
    case KernelClass::Residual: return "residual";
    case KernelClass::Bias: return "bias";
    case KernelClass::Rope: return "rope";
    case KernelClass::Embedding: return "embedding";
    case KernelClass::CrossEntropy: return "cross_entropy";
    case KernelClass::Accumulate: return "accumulate";
    case KernelClass::Optimizer: return "optimizer";
    case KernelClass::LaunchBound: return "launch_bound";
    case KernelClass::Copy: return "copy";
  }
  return "?";
}

}  // namespace ff
