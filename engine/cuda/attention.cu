// Causal attention on the GPU (kernels.hpp); the twin of layers.hpp's: the
// same GEMMs per (sequence, head), here one cuBLAS strided-batched call per
// sequence over its heads, and the causal softmax and its backward as row
// kernels, one block per (row, head, sequence). Q, K, V of head h of sequence
// s start at qkv + s·S·ld + h·dh (+ hy for K, + 2·hy for V), ld = 3·hy,
// hy = heads·dh; its scores at probs + (s·heads + h)·S·S.
#include <cfloat>

#include "cublas_gemm.hpp"
#include "kernels.hpp"
#include "reduce.cuh"

namespace ff::cuda {

namespace {

// Row i of a score matrix: softmax over keys 0..i in place, zeros after.
template <typename T>
__global__ void causal_softmax_kernel(T* probs, long S) {
  const long i = blockIdx.x;
  T* row = probs + (long(blockIdx.z) * gridDim.y + blockIdx.y) * S * S + i * S;
  T mx = sizeof(T) == 4 ? T(-FLT_MAX) : T(-DBL_MAX);
  for (long j = threadIdx.x; j <= i; j += blockDim.x) mx = row[j] > mx ? row[j] : mx;
  mx = block_reduce(mx, Max{});
  T sum = 0;
  for (long j = threadIdx.x; j <= i; j += blockDim.x) sum += (row[j] = exp(row[j] - mx));
  sum = block_reduce(sum, Add{});
  for (long j = threadIdx.x; j < S; j += blockDim.x) row[j] = j <= i ? row[j] / sum : T(0);
}

// Row i of dScores = P ∘ (dP − Σ_j dP ∘ P) · scale, in place over dP.
template <typename T>
__global__ void causal_softmax_backward_kernel(const T* probs, T* dscores, long S, T scale) {
  const long i = blockIdx.x;
  const long at = (long(blockIdx.z) * gridDim.y + blockIdx.y) * S * S + i * S;
  const T* p = probs + at;
  T* ds = dscores + at;
  T acc = 0;
  for (long j = threadIdx.x; j <= i; j += blockDim.x) acc += ds[j] * p[j];
  acc = block_reduce(acc, Add{});
  for (long j = threadIdx.x; j < S; j += blockDim.x) ds[j] = j <= i ? p[j] * (ds[j] - acc) * scale : T(0);
}

}  // namespace

template <typename T>
void attention_forward(cublasHandle_t blas, const T* qkv, T* out, T* probs, long seqs, long S, long heads, long dh,
                       Stream s) {
  if (seqs * S * heads == 0) return;
  const long hy = heads * dh, ld = 3 * hy, SS = S * S;
  const int iS = int(S), idh = int(dh), ih = int(heads);
  for (long q = 0; q < seqs; ++q) {  // scores = scale·Q·Kᵀ
    const T* Q = qkv + q * S * ld;
    gemm_strided_batched<T>(blas, false, true, iS, iS, idh, T(1) / sqrt(T(dh)), Q, int(ld), dh, Q + hy, int(ld), dh,
                            T(0), probs + q * heads * SS, iS, SS, ih);
  }
  causal_softmax_kernel<<<dim3(unsigned(S), unsigned(heads), unsigned(seqs)), kThreads, 0, s>>>(probs, S);
  for (long q = 0; q < seqs; ++q)  // out = P·V
    gemm_strided_batched<T>(blas, false, false, iS, idh, iS, T(1), probs + q * heads * SS, iS, SS,
                            qkv + q * S * ld + 2 * hy, int(ld), dh, T(0), out + q * S * hy, int(hy), dh, ih);
}

template <typename T>
void attention_backward(cublasHandle_t blas, const T* qkv, const T* probs, const T* dout, T* dqkv, T* dscores,
                        long seqs, long S, long heads, long dh, Stream s) {
  if (seqs * S * heads == 0) return;
  const long hy = heads * dh, ld = 3 * hy, SS = S * S;
  const int iS = int(S), idh = int(dh), ih = int(heads);
  for (long q = 0; q < seqs; ++q) {
    const T* Q = qkv + q * S * ld;
    const T* P = probs + q * heads * SS;
    const T* dO = dout + q * S * hy;
    T* dQ = dqkv + q * S * ld;
    T* dP = dscores + q * heads * SS;
    // dP = dO·Vᵀ; dV = Pᵀ·dO
    gemm_strided_batched<T>(blas, false, true, iS, iS, idh, T(1), dO, int(hy), dh, Q + 2 * hy, int(ld), dh, T(0), dP,
                            iS, SS, ih);
    gemm_strided_batched<T>(blas, true, false, iS, idh, iS, T(1), P, iS, SS, dO, int(hy), dh, T(0), dQ + 2 * hy,
                            int(ld), dh, ih);
  }
  causal_softmax_backward_kernel<<<dim3(unsigned(S), unsigned(heads), unsigned(seqs)), kThreads, 0, s>>>(
      probs, dscores, S, T(1) / sqrt(T(dh)));
  for (long q = 0; q < seqs; ++q) {
    const T* Q = qkv + q * S * ld;
    const T* dS = dscores + q * heads * SS;
    T* dQ = dqkv + q * S * ld;
    // dQ = dS·K; dK = dSᵀ·Q
    gemm_strided_batched<T>(blas, false, false, iS, idh, iS, T(1), dS, iS, SS, Q + hy, int(ld), dh, T(0), dQ, int(ld),
                            dh, ih);
    gemm_strided_batched<T>(blas, true, false, iS, idh, iS, T(1), dS, iS, SS, Q, int(ld), dh, T(0), dQ + hy, int(ld),
                            dh, ih);
  }
}

template void attention_forward<float>(cublasHandle_t, const float*, float*, float*, long, long, long, long, Stream);
template void attention_forward<double>(cublasHandle_t, const double*, double*, double*, long, long, long, long,
                                        Stream);
template void attention_backward<float>(cublasHandle_t, const float*, const float*, const float*, float*, float*, long,
                                        long, long, long, Stream);
template void attention_backward<double>(cublasHandle_t, const double*, const double*, const double*, double*,
                                         double*, long, long, long, long, Stream);

}  // namespace ff::cuda
