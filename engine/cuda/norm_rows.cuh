#pragma once
// LayerNorm's and RMSNorm's fused kernels on whole rows (hx = H: nothing
// reduced over X between the steps), shared by layernorm.cu (Centred: the
// mean subtracted, β added) and rmsnorm.cu. Forward: one block per token
// row. Backward: one block per chunk of rows, each row's two sums and dx,
// and the chunk's partial column sums for dγ (dβ), which a second small
// kernel adds in a fixed order: no atomics, so a rerun is bitwise the same.
// The math is the split kernels' (layers.hpp): statistics in M, x̂ and y
// rounded from the same unrounded value; RMSNorm's is LayerNorm's with the
// mean 0 (x − 0 and g − 0 are exact), so one body serves both.
#include <cstdint>
#include <initializer_list>

#include "engine/cuda/reduce.cuh"

namespace ff::cuda {

// W values of T moved by one load or store: one 16-byte chunk (W = kPack<T>,
// scalar.cuh) where every row and vector is aligned to it, else one value.
template <int W, typename T>
__device__ inline void load_values(const T* p, master_t<T> (&out)[W]) {
  if constexpr (W == 1) out[0] = load(p);
  else load16(p, out);
}
template <int W, typename T>
__device__ inline void store_values(T* p, const master_t<T> (&in)[W]) {
  if constexpr (W == 1) store(p, in[0]);
  else store16(p, in);
}

// A row of H = nvec·W values as a block's threads hold it: thread k the
// vectors k, k + kThreads, …, the first V of them in registers (the row is
// read from memory once), any further ones re-read where used (a row longer
// than V·kThreads vectors: correct, if slower).
template <typename T, int W, int V>
struct RowSlice {
  using M = master_t<T>;
  const T* row;
  long nvec;
  M v[V][W];

  __device__ RowSlice(const T* r, long H) : row(r), nvec(H / W) { load(r); }
  __device__ void load(const T* r) {
    row = r;
#pragma unroll
    for (int k = 0; k < V; ++k)
      if (index(k) < nvec) load_values<W>(row + index(k) * W, v[k]);
  }
  __device__ static long index(long k) { return long(threadIdx.x) + k * kThreads; }

  // f(values, first column, register slot or −1) over this thread's vectors.
  template <class F>
  __device__ void each(F f) const {
#pragma unroll
    for (int k = 0; k < V; ++k)
      if (index(k) < nvec) f(v[k], index(k) * W, k);
    for (long k = V; index(k) < nvec; ++k) {
      M tmp[W];
      load_values<W>(row + index(k) * W, tmp);
      f(tmp, index(k) * W, -1);
    }
  }
  // The same over this row's and `o`'s vectors side by side.
  template <class F>
  __device__ void each_with(const RowSlice& o, F f) const {
#pragma unroll
    for (int k = 0; k < V; ++k)
      if (index(k) < nvec) f(v[k], o.v[k], index(k) * W, k);
    for (long k = V; index(k) < nvec; ++k) {
      M a[W], b[W];
      load_values<W>(row + index(k) * W, a);
      load_values<W>(o.row + index(k) * W, b);
      f(a, b, index(k) * W, -1);
    }
  }
};

template <bool Centred, typename T, int W, int V, typename M = master_t<T>>
__global__ void fused_norm_forward_kernel(const T* x, const T* gamma, const T* beta, T* y, T* xhat, M* rstd, long H,
                                          M eps) {
  const long at = long(blockIdx.x) * H;
  const RowSlice<T, W, V> row(x + at, H);
  M m = 0;
  if constexpr (Centred) {
    M s = 0;
    row.each([&](const M(&v)[W], long, int) {
#pragma unroll
      for (int w = 0; w < W; ++w) s += v[w];
    });
    m = block_reduce(s, Add{}) / M(H);
  }
  // Centred squares from the registers: E[x²] − mean² would cancel.
  M q = 0;
  row.each([&](const M(&v)[W], long, int) {
#pragma unroll
    for (int w = 0; w < W; ++w) q += (v[w] - m) * (v[w] - m);
  });
  const M r = M(1) / sqrt(block_reduce(q, Add{}) / M(H) + eps);
  if (threadIdx.x == 0) rstd[blockIdx.x] = r;
  row.each([&](const M(&v)[W], long j, int) {
    M g[W], b[W] = {}, xh[W], out[W];
    load_values<W>(gamma + j, g);
    if constexpr (Centred) load_values<W>(beta + j, b);
#pragma unroll
    for (int w = 0; w < W; ++w) {
      xh[w] = (v[w] - m) * r;
      out[w] = Centred ? xh[w] * g[w] + b[w] : xh[w] * g[w];
    }
    store_values<W>(xhat + at + j, xh);
    store_values<W>(y + at + j, out);
  });
}

// γ's values at column j: from the registers of slot k, else read.
template <typename T, int W, int V, typename M = master_t<T>>
__device__ inline void gamma_at(const RowSlice<T, W, V>& g, const T* gamma, long j, int k, M (&out)[W]) {
  if (k >= 0) {
#pragma unroll
    for (int w = 0; w < W; ++w) out[w] = g.v[k][w];
  } else {
    load_values<W>(gamma + j, out);
  }
}

// part [chunks, P·H]: each chunk's Σ dy·x̂ (dγ), then for LayerNorm its Σ dy
// (dβ). A thread keeps its register slots' partials in registers and adds
// any further vectors' straight into part (its own columns: no race).
// Three blocks a multiprocessor where a row fits one vector a thread (80
// registers, no spills; 96 left two): a row's work waits on latency, so
// more rows in flight pay.
template <bool Centred, typename T, int W, int V, typename M = master_t<T>>
__global__ void __launch_bounds__(kThreads, V == 1 ? 3 : 1)
    fused_norm_backward_kernel(const T* dy, const T* xhat, const M* rstd, const T* gamma, T* dx, M* part, long t,
                               long H, long rows) {
  constexpr int P = Centred ? 2 : 1;
  const long lo = long(blockIdx.x) * rows, hi = lo + rows < t ? lo + rows : t;
  M* pc = part + long(blockIdx.x) * P * H;
  M acc[V][P][W] = {};
  // The next row's loads go out before this row's barriers where the
  // registers allow (rows of up to 2·kThreads vectors): a row at a time,
  // a block waited on memory and on its barriers in turn.
  constexpr bool kPrefetch = V <= 2;
  RowSlice<T, W, V> d(dy + lo * H, H), xh(xhat + lo * H, H);
  const RowSlice<T, W, V> gm_row(gamma, H);  // γ, the same for every row: read once
  M r = rstd[lo];
  for (long i = lo; i < hi; ++i) {
    const long at = i * H;
    RowSlice<T, W, V> next_d = d, next_xh = xh;
    M next_r = r;
    if constexpr (kPrefetch)
      if (i + 1 < hi) next_d.load(dy + at + H), next_xh.load(xhat + at + H), next_r = rstd[i + 1];
    M a = 0, b = 0;  // Σ g and Σ g·x̂, g = dy·γ
    d.each_with(xh, [&](const M(&dv)[W], const M(&xv)[W], long j, int k) {
      M gm[W];
      gamma_at(gm_row, gamma, j, k, gm);
#pragma unroll
      for (int w = 0; w < W; ++w) {
        const M g = dv[w] * gm[w];
        if constexpr (Centred) a += g;
        b += g * xv[w];
      }
    });
    block_sum2(a, b);  // (a is 0 for RMSNorm)
    if constexpr (!kPrefetch) r = rstd[i];
    const M ma = Centred ? a / M(H) : M(0), mb = b / M(H);
    d.each_with(xh, [&](const M(&dv)[W], const M(&xv)[W], long j, int k) {
      M gm[W], out[W];
      gamma_at(gm_row, gamma, j, k, gm);
#pragma unroll
      for (int w = 0; w < W; ++w) {
        out[w] = r * (dv[w] * gm[w] - ma - xv[w] * mb);
        const M val[2] = {dv[w] * xv[w], dv[w]};
#pragma unroll
        for (int p = 0; p < P; ++p) {
          if (k >= 0) acc[k][p][w] += val[p];
          else pc[p * H + j + w] = (i == lo ? M(0) : pc[p * H + j + w]) + val[p];
        }
      }
      store_values<W>(dx + at + j, out);
    });
    if (i + 1 >= hi) break;
    if constexpr (kPrefetch) d = next_d, xh = next_xh, r = next_r;
    else d.load(dy + at + H), xh.load(xhat + at + H);
  }
#pragma unroll
  for (int k = 0; k < V; ++k) {
    const long j = RowSlice<T, W, V>::index(k) * W;
    if (j >= H) continue;
#pragma unroll
    for (int p = 0; p < P; ++p)
#pragma unroll
      for (int w = 0; w < W; ++w) pc[p * H + j + w] = acc[k][p][w];
  }
}

// dγ[j] += Σ_c part[c][j] (and dβ from the columns after H): each column's
// chunks split over kLanes lanes, the lanes' sums added in lane order.
constexpr int kLanes = 8, kLaneCols = kThreads / kLanes;
template <typename M>
__global__ void add_norm_partials_kernel(const M* part, long chunks, long H, long n, M* dgamma, M* dbeta) {
  const int col = int(threadIdx.x) % kLaneCols, lane = int(threadIdx.x) / kLaneCols;
  const long j = long(blockIdx.x) * kLaneCols + col;
  M acc = 0;
  if (j < n)
    for (long c = lane; c < chunks; c += kLanes) acc += part[c * n + j];
  __shared__ M lanes[kLanes][kLaneCols];
  lanes[lane][col] = acc;
  __syncthreads();
  if (lane != 0 || j >= n) return;
  M sum = lanes[0][col];
  for (int l = 1; l < kLanes; ++l) sum += lanes[l][col];
  M* out = j < H ? dgamma + j : dbeta + (j - H);
  *out += sum;
}

// Calls f.template operator()<W, V>() with the widest W every pointer and
// row allows and the fewest register vectors V (up to 4) that hold a row.
template <typename T, class F>
void with_row_shape(long H, std::initializer_list<const void*> ptrs, F f) {
  const bool aligned = H % kPack<T> == 0 && aligned16(ptrs);  // (a null β counts as aligned)
  const auto regs = [&]<int W>() {
    const long per_thread = (H / W + kThreads - 1) / kThreads;
    if (per_thread <= 1) f.template operator()<W, 1>();
    else if (per_thread <= 2) f.template operator()<W, 2>();
    else f.template operator()<W, 4>();
  };
  if (aligned) regs.template operator()<kPack<T>>();
  else regs.template operator()<1>();
}

// Enough chunks of rows to fill the GPU with blocks; fewer would leave SMs
// idle, more would grow the partials the second kernel reads.
constexpr long kNormChunks = 512;

template <bool Centred, typename T>
void fused_norm_forward(const T* x, const T* gamma, const T* beta, T* y, T* xhat, master_t<T>* rstd, long t, long H,
                        double eps, cudaStream_t s) {
  if (t <= 0) return;
  with_row_shape<T>(H, {x, gamma, beta, y, xhat}, [&]<int W, int V>() {
    fused_norm_forward_kernel<Centred, T, W, V>
        <<<unsigned(t), kThreads, 0, s>>>(x, gamma, beta, y, xhat, rstd, H, master_t<T>(eps));
  });
}

template <bool Centred, typename T>
void fused_norm_backward(const T* dy, const T* xhat, const master_t<T>* rstd, const T* gamma, T* dx,
                         master_t<T>* dgamma, master_t<T>* dbeta, long t, long H, cudaStream_t s) {
  using M = master_t<T>;
  if (t <= 0) return;
  const long rows = (t + kNormChunks - 1) / kNormChunks, chunks = (t + rows - 1) / rows, n = (Centred ? 2 : 1) * H;
  M* part = static_cast<M*>(column_sum_workspace(size_t(chunks * n) * sizeof(M)));
  with_row_shape<T>(H, {dy, xhat, gamma, dx}, [&]<int W, int V>() {
    fused_norm_backward_kernel<Centred, T, W, V>
        <<<unsigned(chunks), kThreads, 0, s>>>(dy, xhat, rstd, gamma, dx, part, t, H, rows);
  });
  add_norm_partials_kernel<<<unsigned((n + kLaneCols - 1) / kLaneCols), kThreads, 0, s>>>(part, chunks, H, n, dgamma,
                                                                                          dbeta);
}

}  // namespace ff::cuda
