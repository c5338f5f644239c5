#pragma once
// Row-major GEMMs with the bias (and GELU) in cuBLASLt's epilogue, the linear
// layers' forward as one kernel: C = op(A)·op(B) + bias, bias[j] added to
// column j of C [m, n] (contiguous); with `pre`, pre = that and C = gelu(pre)
// (GELU's tanh form, GPT-2's, as layers.hpp's gelu_forward), pre kept for
// GELU's backward. As cublas_gemm.hpp, cuBLASLt sees the column-major Cᵀ
// [n, m] = op(B)ᵀ·op(A)ᵀ, whose rows are C's columns: the bias, one value a
// row of Cᵀ, is what CUBLASLT_EPILOGUE_BIAS broadcasts. The epilogue adds it
// to the fp32 accumulator and rounds once; the cpu's twin rounds the product
// to T, adds and rounds again (bf16: a rounding apart). fp32 in fp32 (no
// TF32), bf16 with fp32 accumulation; each case's algorithm is the
// heuristic's first, chosen once and kept (cuBLASLt is deterministic for a
// fixed algorithm). Pointers are device memory.
#include <cuda_runtime.h>

#include <memory>
#include <type_traits>

#include "engine/runtime/bf16.hpp"

namespace ff::cuda {

class EpilogueGemm {
 public:
  // Opens cuBLASLt and takes its workspace at the first call that runs.
  explicit EpilogueGemm(cudaStream_t stream);
  ~EpilogueGemm();
  EpilogueGemm(const EpilogueGemm&) = delete;
  EpilogueGemm& operator=(const EpilogueGemm&) = delete;

  // Enqueues the GEMM on the stream; false, enqueueing nothing, where
  // cuBLASLt has no epilogue kernel for the case: fp64, a GELU whose `pre`
  // rows (n) are not a multiple of 8 values (AUX_LD's rule), or no algorithm
  // from the heuristic (remembered: it is not asked again). The caller then
  // runs the GEMM and the element-wise kernels itself.
  template <typename T>
  bool run(bool ta, bool tb, int m, int n, int k, engine::master_t<T> alpha, const T* A, int lda, const T* B, int ldb,
           const T* bias, T* pre, T* C) {
    if constexpr (std::is_same_v<T, double>) return false;
    else return run(std::is_same_v<T, float>, ta, tb, m, n, k, float(alpha), A, lda, B, ldb, bias, pre, C);
  }

 private:
  bool run(bool fp32, bool ta, bool tb, int m, int n, int k, float alpha, const void* A, int lda, const void* B,
           int ldb, const void* bias, void* pre, void* C);
  struct Impl;
  cudaStream_t stream_;
  std::unique_ptr<Impl> impl_;  // made at the first call
};

}  // namespace ff::cuda
