// The embedding on the GPU (kernels.hpp); the twin of layers.hpp's: the
// lookup and positions in T (the sum computed in M), the gradients into M.
#include <algorithm>
#include <utility>

#include "engine/cuda/kernels.hpp"
#include "engine/cuda/reduce.cuh"

namespace ff::cuda {

namespace {

__device__ long token_row(const int* tokens, long i, long S, long v0) { return tokens[(i / S) * (S + 1) + i % S] - v0; }

template <typename T>
__global__ void lookup_kernel(const int* tokens, const T* E, long ldE, T* h0, long t, long S, long hx, long vy,
                              long v0) {
  const long k = long(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= t * hx) return;
  const long i = k / hx, j = k % hx, r = token_row(tokens, i, S, v0);
  if (r >= 0 && r < vy) h0[k] = E[r * ldE + j];  // a copy: no rounding
  else store(h0 + k, master_t<T>(0));
}

template <typename T>
__global__ void positions_kernel(T* h0, const T* pos, long t, long S, long hx) {
  const long k = long(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= t * hx) return;
  store(h0 + k, load(h0 + k) + load(pos + (k / hx % S) * hx + k % hx));
}

// Ahead of a row's adds, each thread loads this many of its tokens' values:
// a row hit by many tokens (a frequent word, a byte-level text's space)
// waits on memory once per kAhead tokens, not once per token.
constexpr int kAhead = 8;

// One block per (row hit, chunk of columns), a thread per column: the row's
// tokens, sorted by position (EmbeddingRows::build), are added in token
// order into a register that starts from dE and is stored once, which are
// the cpu's additions bit for bit (each rounds to M either way); no two
// blocks touch the same value, so no atomics and the same sums every run.
template <typename T, typename M = master_t<T>>
__global__ void scatter_rows_kernel(const int* csr, long rows, long chunks, const T* dh0, M* dE, long ldE, long hx) {
  const long e = long(blockIdx.x) / chunks, j = long(blockIdx.x) % chunks * blockDim.x + threadIdx.x;
  if (j >= hx) return;
  const int *row = csr + rows + 1, *pos = row + rows;
  const int end = csr[e + 1];
  int p = csr[e];
  M* d = dE + long(row[e]) * ldE + j;
  M acc = *d;
  for (; p + kAhead <= end; p += kAhead) {
    M v[kAhead];
#pragma unroll
    for (int u = 0; u < kAhead; ++u) v[u] = load(dh0 + long(pos[p + u]) * hx + j);
#pragma unroll
    for (int u = 0; u < kAhead; ++u) acc += v[u];
  }
  for (; p < end; ++p) acc += load(dh0 + long(pos[p]) * hx + j);
  *d = acc;
}

// dpos[p, j] += Σ over the sequences of dh0 at position p, in sequence order.
template <typename T, typename M = master_t<T>>
__global__ void positions_grad_kernel(const T* dh0, M* dpos, long t, long S, long hx) {
  const long k = long(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= S * hx) return;
  M acc = dpos[k];
  for (long i = k; i < t * hx; i += S * hx) acc += load(dh0 + i);
  dpos[k] = acc;
}

}  // namespace

template <typename T>
void embedding_lookup(const int* tokens, const T* E, long ldE, T* h0, long t, long S, long hx, long vy, long v0,
                      Stream s) {
  if (t * hx > 0) lookup_kernel<<<blocks_for(t * hx), kThreads, 0, s>>>(tokens, E, ldE, h0, t, S, hx, vy, v0);
}
template <typename T>
void add_positions(T* h0, const T* pos, long t, long S, long hx, Stream s) {
  if (t * hx > 0) positions_kernel<<<blocks_for(t * hx), kThreads, 0, s>>>(h0, pos, t, S, hx);
}

// A counting sort of the tokens by row: stable, so each row's positions stay
// increasing. Rows are laid out most-hit first, so the blocks with the
// longest chains of adds start first and the launch does not end on a tail
// of them.
void EmbeddingRows::build(const int* tokens, long t, long S, long vy, long v0) {
  if (long(count_.size()) != vy) count_.assign(size_t(vy), 0);
  hit_.clear();
  for (long i = 0; i < t; ++i) {
    const long r = tokens[(i / S) * (S + 1) + i % S] - v0;
    if (r < 0 || r >= vy) continue;
    if (count_[size_t(r)]++ == 0) hit_.push_back(int(r));
  }
  // Most-hit first, by a second counting sort (on count, descending): a
  // comparison sort of thousands of rows would cost the host more than
  // the launch saves.
  int most = 0;
  for (const int r : hit_) most = std::max(most, count_[size_t(r)]);
  by_count_.assign(size_t(most) + 1, 0);
  for (const int r : hit_) ++by_count_[size_t(most - count_[size_t(r)])];
  for (int c = 0, start = 0; c <= most; ++c) start += std::exchange(by_count_[size_t(c)], start);
  order_.resize(hit_.size());
  for (const int r : hit_) order_[size_t(by_count_[size_t(most - count_[size_t(r)])]++)] = r;
  rows = long(order_.size());
  csr.resize(size_t(2 * rows + 1));
  csr[0] = 0;
  for (long e = 0; e < rows; ++e) {
    const size_t r = size_t(order_[size_t(e)]);
    csr[size_t(e + 1)] = csr[size_t(e)] + count_[r];
    csr[size_t(rows + 1 + e)] = int(r);
    count_[r] = csr[size_t(e)];  // from here on the row's next slot among the positions
  }
  const size_t pos0 = csr.size();
  csr.resize(pos0 + size_t(csr[size_t(rows)]));
  for (long i = 0; i < t; ++i) {
    const long r = tokens[(i / S) * (S + 1) + i % S] - v0;
    if (r >= 0 && r < vy) csr[pos0 + size_t(count_[size_t(r)]++)] = int(i);
  }
  for (const int r : hit_) count_[size_t(r)] = 0;  // zero again for the next micro-batch
}

template <typename T>
void embedding_scatter_add(const int* csr, long rows, const T* dh0, master_t<T>* dE, long ldE, master_t<T>* dpos,
                           long t, long S, long hx, Stream s) {
  if (t * hx <= 0) return;
  // A block no wider than the row (in warps): narrow models leave no
  // threads idle.
  const long threads = std::min<long>(kThreads, (hx + 31) / 32 * 32), chunks = (hx + threads - 1) / threads;
  if (rows > 0)
    scatter_rows_kernel<<<unsigned(rows * chunks), unsigned(threads), 0, s>>>(csr, rows, chunks, dh0, dE, ldE, hx);
  if (dpos) positions_grad_kernel<<<blocks_for(S * hx), kThreads, 0, s>>>(dh0, dpos, t, S, hx);  // none: rotary
}

#define FF_EMBEDDING(T, M)                                                                                       \
  template void embedding_lookup<T>(const int*, const T*, long, T*, long, long, long, long, long, Stream);      \
  template void add_positions<T>(T*, const T*, long, long, long, Stream);                                       \
  template void embedding_scatter_add<T>(const int*, long, const T*, M*, long, M*, long, long, long, Stream);
FF_EMBEDDING(float, float)
FF_EMBEDDING(double, double)
FF_EMBEDDING(bf16, float)

}  // namespace ff::cuda
