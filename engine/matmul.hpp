#pragma once
// Row-major GEMM through CBLAS: C[m,n] (+)= op(A)[m,k] · op(B)[k,n]. The CPU
// backend's only GEMM; a GPU backend would put cuBLAS behind the same call.
// While collectives are in flight the product is cut into row panels with
// `progress` called between them, so MPI gets to move them.
#include <cblas.h>

#include <algorithm>
#include <cstddef>

#include "grid_comm.hpp"

namespace ff::engine {

struct GemmStats {
  double seconds = 0;
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

// C = alpha·op(A)·op(B) + beta·C, timed into `st`; with `comm` given and an
// operation in flight, in panels of output rows with progress between.
template <typename T>
void gemm(GemmStats& st, GridComm* comm, bool ta, bool tb, int m, int n, int k, T alpha, const T* A, int lda,
          const T* B, int ldb, T beta, T* C, int ldc) {
  if (m == 0 || n == 0) return;
  int panels = (comm && comm->pending()) ? std::min(8, m) : 1;
  int rows = (m + panels - 1) / panels;
  for (int r0 = 0; r0 < m; r0 += rows) {
    int mr = std::min(rows, m - r0);
    // Rows of op(A): row r of A, or column r of A when transposed.
    const T* Ar = ta ? A + r0 : A + size_t(r0) * lda;
    double g0 = now_s();
    blas_gemm(ta, tb, mr, n, k, alpha, Ar, lda, B, ldb, beta, C + size_t(r0) * ldc, ldc);
    st.seconds += now_s() - g0;
    if (panels > 1) comm->progress();
  }
  st.flops += 2.0 * m * n * k;
}

}  // namespace ff::engine
