#pragma once
// Row-major GEMMs on cuBLAS, the GPU twin of matmul.hpp's blas_gemm:
// C = alpha·op(A)·op(B) + beta·C with C [m, n]. cuBLAS is column-major, so
// each call computes Cᵀ = op(B)ᵀ·op(A)ᵀ. fp32 without TF32 (the handle's
// math mode decides; checks against the cpu need CUBLAS_PEDANTIC_MATH),
// fp64 for exactness, and bf16 operands with fp32 accumulation, as training
// runs (and measure times): C in bf16, or in fp32 (a weight gradient into
// its fp32 accumulator, beta 1). Pointers are device memory.
#include <cublas_v2.h>

#include "engine/runtime/bf16.hpp"

namespace ff::cuda {

void gemm(cublasHandle_t h, bool ta, bool tb, int m, int n, int k, float alpha, const float* A, int lda, const float* B,
          int ldb, float beta, float* C, int ldc);
void gemm(cublasHandle_t h, bool ta, bool tb, int m, int n, int k, double alpha, const double* A, int lda,
          const double* B, int ldb, double beta, double* C, int ldc);
void gemm(cublasHandle_t h, bool ta, bool tb, int m, int n, int k, float alpha, const engine::bf16* A, int lda,
          const engine::bf16* B, int ldb, float beta, engine::bf16* C, int ldc);
void gemm(cublasHandle_t h, bool ta, bool tb, int m, int n, int k, float alpha, const engine::bf16* A, int lda,
          const engine::bf16* B, int ldb, float beta, float* C, int ldc);
// `batch` products C_b = alpha·op(A_b)·op(B_b) + beta·C_b, X_b = X + b·stride_x:
// the same product over every head of a sequence (attention). Operands T
// (float, double, bf16), C in T or in master_t<T> (bf16's scores in fp32);
// alpha and beta in master_t<T>, the accumulation's type.
template <typename T, typename C>
void gemm_strided_batched(cublasHandle_t h, bool ta, bool tb, int m, int n, int k, engine::master_t<T> alpha,
                          const T* A, int lda, long long stride_a, const T* B, int ldb, long long stride_b,
                          engine::master_t<T> beta, C* c, int ldc, long long stride_c, int batch);
// A, B, C: __nv_bfloat16 arrays (measure's GEMM sweep, without the engine's types).
void gemm_bf16(cublasHandle_t h, bool ta, bool tb, int m, int n, int k, float alpha, const void* A, int lda,
               const void* B, int ldb, float beta, void* C, int ldc);

}  // namespace ff::cuda
