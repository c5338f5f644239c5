#include "cublas_gemm.hpp"

#include "cublas_api.hpp"
#include "cuda_check.hpp"

namespace ff::cuda {

namespace {

// Row-major C[m,n] = op(A)·op(B) is column-major Cᵀ[n,m] = op(B)ᵀ·op(A)ᵀ:
// the operands swap and each keeps its own transpose flag and leading dimension.
void gemm_ex(cublasHandle_t h, bool ta, bool tb, int m, int n, int k, const void* alpha, const void* A,
             cudaDataType_t ab, int lda, const void* B, int ldb, const void* beta, void* C, cudaDataType_t c, int ldc,
             cublasComputeType_t compute) {
  CUBLAS_CHECK(cublas().gemm_ex(h, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, alpha, B,
                                ab, ldb, A, ab, lda, beta, C, c, ldc, compute, CUBLAS_GEMM_DEFAULT));
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

template <typename T>
void gemm_strided_batched(cublasHandle_t h, bool ta, bool tb, int m, int n, int k, T alpha, const T* A, int lda,
                          long long stride_a, const T* B, int ldb, long long stride_b, T beta, T* C, int ldc,
                          long long stride_c, int batch) {
  constexpr bool fp64 = sizeof(T) == 8;
  const cudaDataType_t t = fp64 ? CUDA_R_64F : CUDA_R_32F;
  CUBLAS_CHECK(cublas().gemm_strided_batched_ex(h, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, n, m,
                                                k, &alpha, B, t, ldb, stride_b, A, t, lda, stride_a, &beta, C, t, ldc,
                                                stride_c, batch, fp64 ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F,
                                                CUBLAS_GEMM_DEFAULT));
}
template void gemm_strided_batched<float>(cublasHandle_t, bool, bool, int, int, int, float, const float*, int,
                                          long long, const float*, int, long long, float, float*, int, long long, int);
template void gemm_strided_batched<double>(cublasHandle_t, bool, bool, int, int, int, double, const double*, int,
                                           long long, const double*, int, long long, double, double*, int, long long,
                                           int);

void gemm_bf16(cublasHandle_t h, bool ta, bool tb, int m, int n, int k, float alpha, const void* A, int lda,
               const void* B, int ldb, float beta, void* C, int ldc) {
  gemm_ex(h, ta, tb, m, n, k, &alpha, A, CUDA_R_16BF, lda, B, ldb, &beta, C, CUDA_R_16BF, ldc, CUBLAS_COMPUTE_32F);
}

}  // namespace ff::cuda
