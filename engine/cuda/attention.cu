// Causal attention on the GPU (kernels.hpp); the twin of layers.hpp's: the
// same GEMMs per (sequence, head), here one cuBLAS strided-batched call per
// sequence over its heads, and the causal softmax and its backward as row
// kernels, one block per (row, head, sequence). Q, K, V of head h of sequence
// s start at qkv + s·S·ld + h·dh (+ hy for K, + 2·hy for V), ld = 3·hy,
// hy = heads·dh; its scores at probs + (s·heads + h)·S·S. The softmax and its
// backward read the GEMMs' unrounded results (M) and round only what the
// next GEMM reads as T: probs and dS.
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

template <typename T>
void attention_forward(cublasHandle_t blas, const T* qkv, T* out, T* probs, master_t<T>* scores, long seqs, long S,
                       long heads, long dh, Stream s) {
  using M = master_t<T>;
  if (seqs * S * heads == 0) return;
  const long hy = heads * dh, ld = 3 * hy, SS = S * S;
  const int iS = int(S), idh = int(dh), ih = int(heads);
  for (long q = 0; q < seqs; ++q) {  // scores = scale·Q·Kᵀ
    const T* Q = qkv + q * S * ld;
    gemm_strided_batched<T>(blas, false, true, iS, iS, idh, M(1) / sqrt(M(dh)), Q, int(ld), dh, Q + hy, int(ld), dh,
                            M(0), scores + q * heads * SS, iS, SS, ih);
  }
  causal_softmax_kernel<<<dim3(unsigned(S), unsigned(heads), unsigned(seqs)), kThreads, 0, s>>>(scores, probs, S);
  for (long q = 0; q < seqs; ++q)  // out = P·V
    gemm_strided_batched<T>(blas, false, false, iS, idh, iS, M(1), probs + q * heads * SS, iS, SS,
                            qkv + q * S * ld + 2 * hy, int(ld), dh, M(0), out + q * S * hy, int(hy), dh, ih);
}

template <typename T>
void attention_backward(cublasHandle_t blas, const T* qkv, const T* probs, const T* dout, T* dqkv,
                        master_t<T>* scores, T* dscores, long seqs, long S, long heads, long dh, Stream s) {
  using M = master_t<T>;
  if (seqs * S * heads == 0) return;
  const long hy = heads * dh, ld = 3 * hy, SS = S * S;
  const int iS = int(S), idh = int(dh), ih = int(heads);
  for (long q = 0; q < seqs; ++q) {
    const T* Q = qkv + q * S * ld;
    const T* P = probs + q * heads * SS;
    const T* dO = dout + q * S * hy;
    T* dQ = dqkv + q * S * ld;
    M* dP = scores + q * heads * SS;
    // dP = dO·Vᵀ; dV = Pᵀ·dO
    gemm_strided_batched<T>(blas, false, true, iS, iS, idh, M(1), dO, int(hy), dh, Q + 2 * hy, int(ld), dh, M(0), dP,
                            iS, SS, ih);
    gemm_strided_batched<T>(blas, true, false, iS, idh, iS, M(1), P, iS, SS, dO, int(hy), dh, M(0), dQ + 2 * hy,
                            int(ld), dh, ih);
  }
  causal_softmax_backward_kernel<<<dim3(unsigned(S), unsigned(heads), unsigned(seqs)), kThreads, 0, s>>>(
      probs, scores, dscores, S, M(1) / sqrt(M(dh)));
  for (long q = 0; q < seqs; ++q) {
    const T* Q = qkv + q * S * ld;
    const T* dS = dscores + q * heads * SS;
    T* dQ = dqkv + q * S * ld;
    // dQ = dS·K; dK = dSᵀ·Q
    gemm_strided_batched<T>(blas, false, false, iS, idh, iS, M(1), dS, iS, SS, Q + hy, int(ld), dh, M(0), dQ, int(ld),
                            dh, ih);
    gemm_strided_batched<T>(blas, true, false, iS, idh, iS, M(1), dS, iS, SS, Q, int(ld), dh, M(0), dQ + hy, int(ld),
                            dh, ih);
  }
}

#define FF_ATTENTION(T, M)                                                                                    \
  template void attention_forward<T>(cublasHandle_t, const T*, T*, T*, M*, long, long, long, long, Stream);  \
  template void attention_backward<T>(cublasHandle_t, const T*, const T*, const T*, T*, M*, T*, long, long, \
                                      long, long, Stream);
FF_ATTENTION(float, float)
FF_ATTENTION(double, double)
FF_ATTENTION(bf16, float)

}  // namespace ff::cuda
