// Vocabulary-parallel cross-entropy on the GPU (kernels.hpp); the twin of
// layers.hpp's three steps. One block per token row of vy logits, of which
// the first `valid` are real vocabulary (the rest is padding). The max, the
// sums and the loss in M; dlogits holds T values, e and then its gradient,
// each divided from the M value of the stored e.
#include <cfloat>

#include "engine/cuda/kernels.hpp"
#include "engine/cuda/reduce.cuh"

namespace ff::cuda {

namespace {

template <typename M>
__device__ M lowest() {
  return sizeof(M) == 4 ? M(-FLT_MAX) : M(-DBL_MAX);
}

// f(first index, count, vec) over a row's [0, n) in chunks of kPack<T>
// values, a thread's chunks threadIdx.x, threadIdx.x + blockDim.x, …: 16
// bytes a load where the rows are aligned (one value a thread left the
// three passes at half the bandwidth); count < kPack<T> at the end alone.
template <typename T, class F>
__device__ void each_chunk(long n, bool aligned, F f) {
  constexpr int W = kPack<T>;
  for (long j0 = long(threadIdx.x) * W; j0 < n; j0 += long(blockDim.x) * W) {
    const int count = n - j0 < W ? int(n - j0) : W;
    f(j0, count, aligned && count == W);
  }
}

template <typename T, typename M = master_t<T>>
__global__ void row_max_kernel(const T* logits, M* mx, long vy, long valid, bool aligned) {
  const T* l = logits + blockIdx.x * vy;
  M m = lowest<M>();
  each_chunk<T>(valid, aligned, [&](long j0, int count, bool vec) {
    M v[kPack<T>];
    load_pack(l + j0, v, count, vec);
#pragma unroll
    for (int k = 0; k < kPack<T>; ++k)
      if (k < count) m = v[k] > m ? v[k] : m;
  });
  m = block_reduce(m, Max{});
  if (threadIdx.x == 0) mx[blockIdx.x] = valid > 0 ? m : M(-INFINITY);
}

// The sum is of the unrounded e, as the cpu's.
template <typename T, typename M = master_t<T>>
__global__ void exp_sums_kernel(const T* logits, const int* targets, const M* mx, T* dlogits, M* st, long vy, long v0,
                                long valid, bool aligned) {
  const long i = blockIdx.x;
  const T* l = logits + i * vy;
  T* e = dlogits + i * vy;
  const M m = mx[i];
  M acc = 0;
  each_chunk<T>(valid, aligned, [&](long j0, int count, bool vec) {
    M v[kPack<T>];
    load_pack(l + j0, v, count, vec);
#pragma unroll
    for (int k = 0; k < kPack<T>; ++k)
      if (k < count) v[k] = exp(v[k] - m), acc += v[k];
    store_pack(e + j0, v, count, vec);
  });
  acc = block_reduce(acc, Add{});
  if (threadIdx.x == 0) {
    const long tj = targets[i] - v0;
    st[2 * i] = acc;
    st[2 * i + 1] = (tj >= 0 && tj < vy) ? load(l + tj) : M(0);
  }
}

// Each value is read and rewritten by the one thread whose chunk holds it,
// the target's too: e/sum·scale, the target's (e/sum − 1)·scale, padding 0.
template <typename T, typename M = master_t<T>>
__global__ void finish_kernel(const int* targets, const M* mx, const M* st, T* dlogits, M* loss, long vy, long v0,
                              long valid, M grad_scale, bool aligned) {
  const long i = blockIdx.x;
  const M sum = st[2 * i];
  T* d = dlogits + i * vy;
  const long tj = targets[i] - v0;
  const bool here = tj >= 0 && tj < valid;
  each_chunk<T>(vy, aligned, [&](long j0, int count, bool vec) {
    M v[kPack<T>];
    load_pack(d + j0, v, count, vec);
#pragma unroll
    for (int k = 0; k < kPack<T>; ++k) {
      const long j = j0 + k;
      v[k] = j >= valid ? M(0) : here && j == tj ? (v[k] / sum - M(1)) * grad_scale : v[k] / sum * grad_scale;
    }
    store_pack(d + j0, v, count, vec);
  });
  if (threadIdx.x == 0) loss[i] = log(sum) + mx[i] - st[2 * i + 1];
}

}  // namespace

template <typename T>
void cross_entropy_row_max(const T* logits, master_t<T>* mx, long t, long vy, long valid, Stream s) {
  row_max_kernel<<<unsigned(t), kThreads, 0, s>>>(logits, mx, vy, valid, vy % kPack<T> == 0 && aligned16({logits}));
}
template <typename T>
void cross_entropy_exp_sums(const T* logits, const int* targets, const master_t<T>* mx, T* dlogits, master_t<T>* st,
                            long t, long vy, long v0, long valid, Stream s) {
  exp_sums_kernel<<<unsigned(t), kThreads, 0, s>>>(logits, targets, mx, dlogits, st, vy, v0, valid,
                                                   vy % kPack<T> == 0 && aligned16({logits, dlogits}));
}
template <typename T>
void cross_entropy_finish(const int* targets, const master_t<T>* mx, const master_t<T>* st, T* dlogits,
                          master_t<T>* loss, long t, long vy, long v0, long valid, master_t<T> grad_scale, Stream s) {
  finish_kernel<<<unsigned(t), kThreads, 0, s>>>(targets, mx, st, dlogits, loss, vy, v0, valid, grad_scale,
                                                 vy % kPack<T> == 0 && aligned16({dlogits}));
}

#define FF_CROSS_ENTROPY(T, M)                                                                              \
  template void cross_entropy_row_max<T>(const T*, M*, long, long, long, Stream);                          \
  template void cross_entropy_exp_sums<T>(const T*, const int*, const M*, T*, M*, long, long, long, long,  \
                                          Stream);                                                         \
  template void cross_entropy_finish<T>(const int*, const M*, const M*, T*, M*, long, long, long, long, M, \
                                        Stream);
FF_CROSS_ENTROPY(float, float)
FF_CROSS_ENTROPY(double, double)
FF_CROSS_ENTROPY(bf16, float)

}  // namespace ff::cuda
