// Causal attention on the GPU (kernels.hpp); the twin of layers.hpp's: the
// same GEMMs per (sequence, query head), here cuBLAS strided-batched calls
// over a sequence's heads, and the causal softmax and its backward as row
// kernels, one block per (row, query head, sequence). With kv KV heads,
// ld = (heads + 2·kv)·dh and hy = heads·dh: query head h of sequence s reads
// Q at qkv + s·S·ld + h·dh and KV head h/(heads/kv)'s K and V after the hy
// Q columns (HeadLayout); its scores at probs + (s·heads + h)·S·S. The
// softmax and its backward read the GEMMs' unrounded results (M) and round
// only what the next GEMM reads as T: probs and dS.
#include <cfloat>

#include "engine/cuda/kernels.hpp"
#include "engine/cuda/reduce.cuh"
#include "engine/runtime/cublas_gemm.hpp"

namespace ff::cuda {

namespace {

// Row i of a score matrix: softmax over keys 0..i, zeros after, into probs.
// The exponentials go back into scores first: where T = M, probs may be
// scores itself (each thread reads its element before writing it).
template <typename T, typename M = master_t<T>>
__global__ void causal_softmax_kernel(M* scores, T* probs, long S) {
  const long i = blockIdx.x;
  const long at = (long(blockIdx.z) * gridDim.y + blockIdx.y) * S * S + i * S;
  M* row = scores + at;
  T* p = probs + at;
  M mx = sizeof(M) == 4 ? M(-FLT_MAX) : M(-DBL_MAX);
  for (long j = threadIdx.x; j <= i; j += blockDim.x) mx = row[j] > mx ? row[j] : mx;
  mx = block_reduce(mx, Max{});
  M sum = 0;
  for (long j = threadIdx.x; j <= i; j += blockDim.x) sum += (row[j] = exp(row[j] - mx));
  sum = block_reduce(sum, Add{});
  for (long j = threadIdx.x; j < S; j += blockDim.x) store(p + j, j <= i ? row[j] / sum : M(0));
}

// Row i of dS = P ∘ (dP − Σ_j dP ∘ P) · scale from dP (M), rounded to T
// into dscores (which may be dP itself where T = M).
template <typename T, typename M = master_t<T>>
__global__ void causal_softmax_backward_kernel(const T* probs, const M* dp, T* dscores, long S, M scale) {
  const long i = blockIdx.x;
  const long at = (long(blockIdx.z) * gridDim.y + blockIdx.y) * S * S + i * S;
  const T* p = probs + at;
  const M* d = dp + at;
  T* ds = dscores + at;
  M acc = 0;
  for (long j = threadIdx.x; j <= i; j += blockDim.x) acc += d[j] * load(p + j);
  acc = block_reduce(acc, Add{});
  for (long j = threadIdx.x; j < S; j += blockDim.x) store(ds + j, j <= i ? load(p + j) * (d[j] - acc) * scale : M(0));
}

}  // namespace

// Grouped-query attention as strided batches: query head h = b·group + r
// reads KV head b, so for each member r of a group one call covers the kv
// groups b (Q and its scores advance a whole group per batch, K and V one
// head). kv = heads is one call per sequence over the heads, as before.
template <typename T>
void attention_forward(cublasHandle_t blas, const T* qkv, T* out, T* probs, master_t<T>* scores, long seqs, long S,
                       long heads, long kv, long dh, Stream s) {
  using M = master_t<T>;
  if (seqs * S * heads == 0) return;
  const long hy = heads * dh, ld = (heads + 2 * kv) * dh, SS = S * S, group = heads / kv;
  const int iS = int(S), idh = int(dh), ikv = int(kv);
  for (long q = 0; q < seqs; ++q)  // scores = scale·Q·Kᵀ
    for (long r = 0; r < group; ++r) {
      const T* Q = qkv + q * S * ld;
      gemm_strided_batched<T>(blas, false, true, iS, iS, idh, M(1) / sqrt(M(dh)), Q + r * dh, int(ld), group * dh,
                              Q + hy, int(ld), dh, M(0), scores + (q * heads + r) * SS, iS, group * SS, ikv);
    }
  causal_softmax_kernel<<<dim3(unsigned(S), unsigned(heads), unsigned(seqs)), kThreads, 0, s>>>(scores, probs, S);
  for (long q = 0; q < seqs; ++q)  // out = P·V
    for (long r = 0; r < group; ++r)
      gemm_strided_batched<T>(blas, false, false, iS, idh, iS, M(1), probs + (q * heads + r) * SS, iS, group * SS,
                              qkv + q * S * ld + hy + kv * dh, int(ld), dh, M(0), out + q * S * hy + r * dh, int(hy),
                              group * dh, ikv);
}

// A KV head's dK and dV sum over its group's query heads in head order, as
// the cpu adds them: member 0 writes (β = 0), the later ones add (β = 1),
// their calls ordered on the stream.
template <typename T>
void attention_backward(cublasHandle_t blas, const T* qkv, const T* probs, const T* dout, T* dqkv,
                        master_t<T>* scores, T* dscores, long seqs, long S, long heads, long kv, long dh, Stream s) {
  using M = master_t<T>;
  if (seqs * S * heads == 0) return;
  const long hy = heads * dh, ld = (heads + 2 * kv) * dh, SS = S * S, group = heads / kv;
  const int iS = int(S), idh = int(dh), ikv = int(kv);
  for (long q = 0; q < seqs; ++q)
    for (long r = 0; r < group; ++r) {
      const T* Q = qkv + q * S * ld;
      const T* P = probs + (q * heads + r) * SS;
      const T* dO = dout + q * S * hy + r * dh;
      T* dQ = dqkv + q * S * ld;
      M* dP = scores + (q * heads + r) * SS;
      const M kv_beta = r == 0 ? M(0) : M(1);
      // dP = dO·Vᵀ; dV = Pᵀ·dO
      gemm_strided_batched<T>(blas, false, true, iS, iS, idh, M(1), dO, int(hy), group * dh, Q + hy + kv * dh,
                              int(ld), dh, M(0), dP, iS, group * SS, ikv);
      gemm_strided_batched<T>(blas, true, false, iS, idh, iS, M(1), P, iS, group * SS, dO, int(hy), group * dh,
                              kv_beta, dQ + hy + kv * dh, int(ld), dh, ikv);
    }
  causal_softmax_backward_kernel<<<dim3(unsigned(S), unsigned(heads), unsigned(seqs)), kThreads, 0, s>>>(
      probs, scores, dscores, S, M(1) / sqrt(M(dh)));
  for (long q = 0; q < seqs; ++q)
    for (long r = 0; r < group; ++r) {
      const T* Q = qkv + q * S * ld;
      const T* dS = dscores + (q * heads + r) * SS;
      T* dQ = dqkv + q * S * ld;
      const M kv_beta = r == 0 ? M(0) : M(1);
      // dQ = dS·K; dK = dSᵀ·Q
      gemm_strided_batched<T>(blas, false, false, iS, idh, iS, M(1), dS, iS, group * SS, Q + hy, int(ld), dh, M(0),
                              dQ + r * dh, int(ld), group * dh, ikv);
      gemm_strided_batched<T>(blas, true, false, iS, idh, iS, M(1), dS, iS, group * SS, Q + r * dh, int(ld),
                              group * dh, kv_beta, dQ + hy, int(ld), dh, ikv);
    }
}

#define FF_ATTENTION(T, M)                                                                                    \
  template void attention_forward<T>(cublasHandle_t, const T*, T*, T*, M*, long, long, long, long, long,    \
                                     Stream);                                                               \
  template void attention_backward<T>(cublasHandle_t, const T*, const T*, const T*, T*, M*, T*, long, long, \
                                      long, long, long, Stream);
FF_ATTENTION(float, float)
FF_ATTENTION(double, double)
FF_ATTENTION(bf16, float)

}  // namespace ff::cuda
