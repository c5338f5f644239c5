// Causal attention on the GPU (kernels.hpp); the twin of layers.hpp's, whose
// GEMMs per (sequence, head) become one block per row here. Blocks are
// indexed (row, head, sequence); Q, K, V of head h of sequence s start at
// qkv + s·S·ld + h·dh (+ hy for K, + 2·hy for V), ld = 3·hy, hy = heads·dh.
#include <cfloat>

#include "kernels.hpp"
#include "reduce.cuh"

namespace ff::cuda {

namespace {

struct Head {
  long S, heads, dh, hy, ld;
  __device__ long base(long s, long h) const { return s * S * ld + h * dh; }  // Q of (s, h), row 0
  __device__ long scores(long s, long h) const { return (s * heads + h) * S * S; }
};

template <typename T>
__device__ T dot(const T* a, const T* b, long n) {
  T acc = 0;
  for (long d = 0; d < n; ++d) acc += a[d] * b[d];
  return acc;
}

// Row i of softmax(scale·QKᵀ) over keys 0..i, zeros after.
template <typename T>
__global__ void scores_softmax_kernel(const T* qkv, T* probs, Head hd, T scale) {
  const long i = blockIdx.x, h = blockIdx.y, s = blockIdx.z;
  const T* q = qkv + hd.base(s, h) + i * hd.ld;
  const T* k = qkv + hd.base(s, h) + hd.hy;
  T* row = probs + hd.scores(s, h) + i * hd.S;
  T mx = sizeof(T) == 4 ? T(-FLT_MAX) : T(-DBL_MAX);
  for (long j = threadIdx.x; j <= i; j += blockDim.x) {
    row[j] = scale * dot(q, k + j * hd.ld, hd.dh);
    mx = row[j] > mx ? row[j] : mx;
  }
  mx = block_reduce(mx, Max{});
  T sum = 0;
  for (long j = threadIdx.x; j <= i; j += blockDim.x) sum += (row[j] = exp(row[j] - mx));
  sum = block_reduce(sum, Add{});
  for (long j = threadIdx.x; j < hd.S; j += blockDim.x) row[j] = j <= i ? row[j] / sum : T(0);
}

// out[i, :] = P[i, 0..i] · V: thread d sums over the keys in order.
template <typename T>
__global__ void probs_times_v_kernel(const T* qkv, const T* probs, T* out, Head hd) {
  const long i = blockIdx.x, h = blockIdx.y, s = blockIdx.z;
  const T* v = qkv + hd.base(s, h) + 2 * hd.hy;
  const T* p = probs + hd.scores(s, h) + i * hd.S;
  for (long d = threadIdx.x; d < hd.dh; d += blockDim.x) {
    T acc = 0;
    for (long j = 0; j <= i; ++j) acc += p[j] * v[j * hd.ld + d];
    out[(s * hd.S + i) * hd.hy + h * hd.dh + d] = acc;
  }
}

// dV[j, :] = Σ_{i ≥ j} P[i, j] · dO[i, :].
template <typename T>
__global__ void dv_kernel(const T* probs, const T* dout, T* dqkv, Head hd) {
  const long j = blockIdx.x, h = blockIdx.y, s = blockIdx.z;
  const T* P = probs + hd.scores(s, h);
  const T* dO = dout + s * hd.S * hd.hy + h * hd.dh;
  T* dv = dqkv + hd.base(s, h) + 2 * hd.hy + j * hd.ld;
  for (long d = threadIdx.x; d < hd.dh; d += blockDim.x) {
    T acc = 0;
    for (long i = j; i < hd.S; ++i) acc += P[i * hd.S + j] * dO[i * hd.hy + d];
    dv[d] = acc;
  }
}

// Row i of dScores = P ∘ (dP − Σ_j dP ∘ P) · scale, dP = dO · Vᵀ.
template <typename T>
__global__ void dscores_kernel(const T* qkv, const T* probs, const T* dout, T* dscores, Head hd, T scale) {
  const long i = blockIdx.x, h = blockIdx.y, s = blockIdx.z;
  const T* v = qkv + hd.base(s, h) + 2 * hd.hy;
  const T* p = probs + hd.scores(s, h) + i * hd.S;
  const T* dO = dout + (s * hd.S + i) * hd.hy + h * hd.dh;
  T* ds = dscores + hd.scores(s, h) + i * hd.S;
  T acc = 0;
  for (long j = threadIdx.x; j <= i; j += blockDim.x) {
    ds[j] = dot(dO, v + j * hd.ld, hd.dh);
    acc += ds[j] * p[j];
  }
  acc = block_reduce(acc, Add{});
  for (long j = threadIdx.x; j < hd.S; j += blockDim.x) ds[j] = j <= i ? p[j] * (ds[j] - acc) * scale : T(0);
}

// dQ[i, :] = Σ_{j ≤ i} dS[i, j] · K[j, :]; dK[j, :] = Σ_{i ≥ j} dS[i, j] · Q[i, :].
template <typename T>
__global__ void dq_kernel(const T* qkv, const T* dscores, T* dqkv, Head hd) {
  const long i = blockIdx.x, h = blockIdx.y, s = blockIdx.z;
  const T* k = qkv + hd.base(s, h) + hd.hy;
  const T* ds = dscores + hd.scores(s, h) + i * hd.S;
  T* dq = dqkv + hd.base(s, h) + i * hd.ld;
  for (long d = threadIdx.x; d < hd.dh; d += blockDim.x) {
    T acc = 0;
    for (long j = 0; j <= i; ++j) acc += ds[j] * k[j * hd.ld + d];
    dq[d] = acc;
  }
}

template <typename T>
__global__ void dk_kernel(const T* qkv, const T* dscores, T* dqkv, Head hd) {
  const long j = blockIdx.x, h = blockIdx.y, s = blockIdx.z;
  const T* q = qkv + hd.base(s, h);
  const T* dS = dscores + hd.scores(s, h);
  T* dk = dqkv + hd.base(s, h) + hd.hy + j * hd.ld;
  for (long d = threadIdx.x; d < hd.dh; d += blockDim.x) {
    T acc = 0;
    for (long i = j; i < hd.S; ++i) acc += dS[i * hd.S + j] * q[i * hd.ld + d];
    dk[d] = acc;
  }
}

Head head_of(long S, long heads, long dh) { return Head{S, heads, dh, heads * dh, 3 * heads * dh}; }

}  // namespace

template <typename T>
void attention_forward(const T* qkv, T* out, T* probs, long seqs, long S, long heads, long dh, Stream s) {
  if (seqs * S * heads == 0) return;
  const Head hd = head_of(S, heads, dh);
  const dim3 rows{unsigned(S), unsigned(heads), unsigned(seqs)};
  scores_softmax_kernel<<<rows, kThreads, 0, s>>>(qkv, probs, hd, T(1) / sqrt(T(dh)));
  probs_times_v_kernel<<<rows, kThreads, 0, s>>>(qkv, probs, out, hd);
}

template <typename T>
void attention_backward(const T* qkv, const T* probs, const T* dout, T* dqkv, T* dscores, long seqs, long S,
                        long heads, long dh, Stream s) {
  if (seqs * S * heads == 0) return;
  const Head hd = head_of(S, heads, dh);
  const dim3 rows{unsigned(S), unsigned(heads), unsigned(seqs)};
  dv_kernel<<<rows, kThreads, 0, s>>>(probs, dout, dqkv, hd);
  dscores_kernel<<<rows, kThreads, 0, s>>>(qkv, probs, dout, dscores, hd, T(1) / sqrt(T(dh)));
  dq_kernel<<<rows, kThreads, 0, s>>>(qkv, dscores, dqkv, hd);
  dk_kernel<<<rows, kThreads, 0, s>>>(qkv, dscores, dqkv, hd);
}

template void attention_forward<float>(const float*, float*, float*, long, long, long, long, Stream);
template void attention_forward<double>(const double*, double*, double*, long, long, long, long, Stream);
template void attention_backward<float>(const float*, const float*, const float*, float*, float*, long, long, long,
                                        long, Stream);
template void attention_backward<double>(const double*, const double*, const double*, double*, double*, long, long,
                                         long, long, Stream);

}  // namespace ff::cuda
