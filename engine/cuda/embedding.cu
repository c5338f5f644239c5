// The embedding on the GPU (kernels.hpp); the twin of layers.hpp's: the
// lookup and positions in T (the sum computed in M), the gradients into M.
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

// Thread j owns column j of dE: the tokens' rows are added in token order,
// as the cpu adds them (two tokens may share a row: no atomics, deterministic).
template <typename T, typename M = master_t<T>>
__global__ void scatter_add_kernel(const int* tokens, const T* dh0, M* dE, long ldE, long t, long S, long hx, long vy,
                                   long v0) {
  const long j = long(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= hx) return;
  for (long i = 0; i < t; ++i) {
    const long r = token_row(tokens, i, S, v0);
    if (r >= 0 && r < vy) dE[r * ldE + j] += load(dh0 + i * hx + j);
  }
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
template <typename T>
void embedding_scatter_add(const int* tokens, const T* dh0, master_t<T>* dE, long ldE, master_t<T>* dpos, long t,
                           long S, long hx, long vy, long v0, Stream s) {
  if (t * hx <= 0) return;
  scatter_add_kernel<<<blocks_for(hx), kThreads, 0, s>>>(tokens, dh0, dE, ldE, t, S, hx, vy, v0);
  if (dpos) positions_grad_kernel<<<blocks_for(S * hx), kThreads, 0, s>>>(dh0, dpos, t, S, hx);  // none: rotary
}

#define FF_EMBEDDING(T, M)                                                                                       \
  template void embedding_lookup<T>(const int*, const T*, long, T*, long, long, long, long, long, Stream);      \
  template void add_positions<T>(T*, const T*, long, long, long, Stream);                                       \
  template void embedding_scatter_add<T>(const int*, const T*, M*, long, M*, long, long, long, long, long, Stream);
FF_EMBEDDING(float, float)
FF_EMBEDDING(double, double)
FF_EMBEDDING(bf16, float)

}  // namespace ff::cuda
