#include "engine/runtime/cublas_gemm.hpp"

#include "engine/runtime/cublas_api.hpp"
#include "engine/runtime/cuda_check.hpp"

namespace ff::cuda {

namespace {

using engine::bf16;

template <typename T>
constexpr cudaDataType_t data_type() {
  if constexpr (sizeof(T) == 8) return CUDA_R_64F;
  else if constexpr (sizeof(T) == 4) return CUDA_R_32F;
  else return CUDA_R_16BF;
}
// fp64 accumulates in fp64; fp32 and bf16 in fp32 (no TF32 unless the
// handle's math mode allows it).
template <typename T>
constexpr cublasComputeType_t compute_type() {
  return sizeof(T) == 8 ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F;
}

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

void gemm(cublasHandle_t h, bool ta, bool tb, int m, int n, int k, float alpha, const bf16* A, int lda, const bf16* B,
          int ldb, float beta, bf16* C, int ldc) {
  gemm_ex(h, ta, tb, m, n, k, &alpha, A, CUDA_R_16BF, lda, B, ldb, &beta, C, CUDA_R_16BF, ldc, CUBLAS_COMPUTE_32F);
}

void gemm(cublasHandle_t h, bool ta, bool tb, int m, int n, int k, float alpha, const bf16* A, int lda, const bf16* B,
          int ldb, float beta, float* C, int ldc) {
  gemm_ex(h, ta, tb, m, n, k, &alpha, A, CUDA_R_16BF, lda, B, ldb, &beta, C, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F);
}

template <typename T, typename C>
void gemm_strided_batched(cublasHandle_t h, bool ta, bool tb, int m, int n, int k, engine::master_t<T> alpha,
                          const T* A, int lda, long long stride_a, const T* B, int ldb, long long stride_b,
                          engine::master_t<T> beta, C* c, int ldc, long long stride_c, int batch) {
  const cudaDataType_t t = data_type<T>();
  CUBLAS_CHECK(cublas().gemm_strided_batched_ex(h, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, n, m,
                                                k, &alpha, B, t, ldb, stride_b, A, t, lda, stride_a, &beta, c,
                                                data_type<C>(), ldc, stride_c, batch, compute_type<T>(),
                                                CUBLAS_GEMM_DEFAULT));
}
#define FF_GEMM_STRIDED_BATCHED(T, C)                                                                            \
  template void gemm_strided_batched<T, C>(cublasHandle_t, bool, bool, int, int, int, engine::master_t<T>,      \
                                           const T*, int, long long, const T*, int, long long,                 \
                                           engine::master_t<T>, C*, int, long long, int);
FF_GEMM_STRIDED_BATCHED(float, float)
FF_GEMM_STRIDED_BATCHED(double, double)
FF_GEMM_STRIDED_BATCHED(bf16, bf16)
FF_GEMM_STRIDED_BATCHED(bf16, float)

void gemm_bf16(cublasHandle_t h, bool ta, bool tb, int m, int n, int k, float alpha, const void* A, int lda,
               const void* B, int ldb, float beta, void* C, int ldc) {
  gemm_ex(h, ta, tb, m, n, k, &alpha, A, CUDA_R_16BF, lda, B, ldb, &beta, C, CUDA_R_16BF, ldc, CUBLAS_COMPUTE_32F);
}

}  // namespace ff::cuda
