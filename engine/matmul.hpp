#pragma once
// Row-major GEMM through CBLAS: C[m,n] (+)= op(A)[m,k] · op(B)[k,n], the
// cpu's GEMM kernel (device_kernels.hpp; the cuda device's is cuBLAS). On
// the cpu device, while collectives are in flight, the product is cut into
// row panels with progress between them, so MPI gets to move them.
#include <cblas.h>

#include <algorithm>
#include <cstddef>

#include "clock.hpp"
#include "device.hpp"

namespace ff::engine {

struct GemmStats {
  double seconds = 0;  // device time: measured on cpu, paced on the paced device
  double flops = 0;
};

inline void blas_gemm(bool ta, bool tb, int m, int n, int k, float alpha, const float* A, int lda, const float* B,
                      int ldb, float beta, float* C, int ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, A, lda,
              B, ldb, beta, C, ldc);
}
inline void blas_gemm(bool ta, bool tb, int m, int n, int k, double alpha, const double* A, int lda,
                      const double* B, int ldb, double beta, double* C, int ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, A, lda,
              B, ldb, beta, C, ldc);
}

// The host's product, in panels of output rows with the device's progress
// between them when it asks for that and an operation is in flight. Returns
// the seconds spent in BLAS.
template <typename T>
double host_gemm(Device& dev, bool ta, bool tb, int m, int n, int k, T alpha, const T* A, int lda, const T* B, int ldb,
                 T beta, T* C, int ldc) {
  if (m == 0 || n == 0) return 0;
  const int panels = (dev.host_is_device() && dev.comm_pending()) ? std::min(8, m) : 1;
  const int rows = (m + panels - 1) / panels;
  double seconds = 0;
  for (int r0 = 0; r0 < m; r0 += rows) {
    const int mr = std::min(rows, m - r0);
    // Rows of op(A): row r of A, or column r of A when transposed.
    const T* Ar = ta ? A + r0 : A + size_t(r0) * lda;
    const double g0 = now_s();
    blas_gemm(ta, tb, mr, n, k, alpha, Ar, lda, B, ldb, beta, C + size_t(r0) * ldc, ldc);
    seconds += now_s() - g0;
    if (panels > 1) dev.progress();
  }
  return seconds;
}

}  // namespace ff::engine
