#include "cublas_gemm.hpp"

#include "cuda_check.hpp"

namespace ff::cuda {

namespace {

// Row-major C[m,n] = op(A)·op(B) is column-major Cᵀ[n,m] = op(B)ᵀ·op(A)ᵀ:
// the operands swap and each keeps its own transpose flag and leading dimension.
void gemm_ex(cublasHandle_t h, bool ta, bool tb, int m, int n, int k, const void* alpha, const void* A,
             cudaDataType_t ab, int lda, const void* B, int ldb, const void* beta, void* C, cudaDataType_t c, int ldc,
             cublasComputeType_t compute) {
  CUBLAS_CHECK(cublasGemmEx(h, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, alpha, B, ab,
                            ldb, A, ab, lda, beta, C, c, ldc, compute, CUBLAS_GEMM_DEFAULT));
}

}  // namespace

void gemm(cublasHandle_t h, bool ta, bool tb, int m, int n, int k, float alpha, const float* A, int lda, const float* B,
          int ldb, float beta, float* C, int ldc) {
  gemm_ex(h, ta, tb, m, n, k, &alpha, A, CUDA_R_32F, lda, B, ldb, &beta, C, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F);
}

void gemm(cublasHandle_t h, bool ta, bool tb, int m, int n, int k, double alpha, const double* A, int lda,
          const double* B, int ldb, double beta, double* C, int ldc) {
  gemm_ex(h, ta, tb, m, n, k, &alpha, A, CUDA_R_64F, lda, B, ldb, &beta, C, CUDA_R_64F, ldc, CUBLAS_COMPUTE_64F);
}

void gemm_bf16(cublasHandle_t h, bool ta, bool tb, int m, int n, int k, float alpha, const void* A, int lda,
               const void* B, int ldb, float beta, void* C, int ldc) {
  gemm_ex(h, ta, tb, m, n, k, &alpha, A, CUDA_R_16BF, lda, B, ldb, &beta, C, CUDA_R_16BF, ldc, CUBLAS_COMPUTE_32F);
}

}  // namespace ff::cuda
