#pragma once
// Row-major GEMM through CBLAS: C[m,n] (+)= op(A)[m,k] · op(B)[k,n], the
// cpu's GEMM kernel (device_kernels.hpp; the cuda device's is cuBLAS). On
// the cpu device, while collectives are in flight, the product is cut into
// row panels with progress between them, so MPI gets to move them.
#include <cblas.h>

#include <algorithm>
#include <cstddef>
#include <type_traits>
#include <vector>

#include "engine/device.hpp"
#include "engine/runtime/bf16.hpp"
#include "engine/runtime/clock.hpp"

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
double blas_panels(Device& dev, bool ta, bool tb, int m, int n, int k, T alpha, const T* A, int lda, const T* B,
                   int ldb, T beta, T* C, int ldc) {
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

// A rows × cols block of X (row stride ld) into `out` as float, contiguous.
inline void widen_block(const bf16* X, int rows, int cols, int ld, std::vector<float>& out) {
  out.resize(size_t(rows) * size_t(cols));
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) out[size_t(r) * cols + c] = float(X[size_t(r) * ld + c]);
}

// C = alpha·op(A)·op(B) + beta·C with C in T or in T's master type (a weight
// gradient into its accumulator). bf16 operands are widened to float and
// multiplied by sgemm: fp32 accumulation, as cuBLAS's bf16 GEMMs; a bf16 C
// is rounded once, at the end.
template <typename T, typename C>
double host_gemm(Device& dev, bool ta, bool tb, int m, int n, int k, master_t<T> alpha, const T* A, int lda,
                 const T* B, int ldb, master_t<T> beta, C* Cp, int ldc) {
  static_assert(std::is_same_v<C, T> || std::is_same_v<C, master_t<T>>);
  if (m == 0 || n == 0) return 0;
  if constexpr (std::is_same_v<T, bf16>) {
    thread_local std::vector<float> a, b, c;
    widen_block(A, ta ? k : m, ta ? m : k, lda, a);
    widen_block(B, tb ? n : k, tb ? k : n, ldb, b);
    const int la = ta ? m : k, lb = tb ? k : n;
    if constexpr (std::is_same_v<C, float>) {
      return blas_panels(dev, ta, tb, m, n, k, alpha, a.data(), la, b.data(), lb, beta, Cp, ldc);
    } else {
      c.assign(size_t(m) * n, 0.0f);
      if (beta != 0.0f)
        for (int r = 0; r < m; ++r)
          for (int j = 0; j < n; ++j) c[size_t(r) * n + j] = float(Cp[size_t(r) * ldc + j]);
      const double s = blas_panels(dev, ta, tb, m, n, k, alpha, a.data(), la, b.data(), lb, beta, c.data(), n);
      for (int r = 0; r < m; ++r)
        for (int j = 0; j < n; ++j) Cp[size_t(r) * ldc + j] = bf16(c[size_t(r) * n + j]);
      return s;
    }
  } else {
    return blas_panels(dev, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, Cp, ldc);
  }
}

}  // namespace ff::engine
