// Vocabulary-parallel cross-entropy on the GPU (kernels.hpp); the twin of
// layers.hpp's three steps. One block per token row of vy logits, of which
// the first `valid` are real vocabulary (the rest is padding).
#include <cfloat>

#include "kernels.hpp"
#include "reduce.cuh"

namespace ff::cuda {

namespace {

template <typename T>
__device__ T lowest() {
  return sizeof(T) == 4 ? T(-FLT_MAX) : T(-DBL_MAX);
}

template <typename T>
__global__ void row_max_kernel(const T* logits, T* mx, long vy, long valid) {
  const T* l = logits + blockIdx.x * vy;
  T m = lowest<T>();
  for (long j = threadIdx.x; j < valid; j += blockDim.x) m = l[j] > m ? l[j] : m;
  m = block_reduce(m, Max{});
  if (threadIdx.x == 0) mx[blockIdx.x] = valid > 0 ? m : T(-INFINITY);
}

template <typename T>
__global__ void exp_sums_kernel(const T* logits, const int* targets, const T* mx, T* dlogits, T* st, long vy, long v0,
                                long valid) {
  const long i = blockIdx.x;
  const T* l = logits + i * vy;
  T* e = dlogits + i * vy;
  const T m = mx[i];
  T acc = 0;
  for (long j = threadIdx.x; j < valid; j += blockDim.x) acc += (e[j] = exp(l[j] - m));
  acc = block_reduce(acc, Add{});
  if (threadIdx.x == 0) {
    const long tj = targets[i] - v0;
    st[2 * i] = acc;
    st[2 * i + 1] = (tj >= 0 && tj < vy) ? l[tj] : T(0);
  }
}

template <typename T>
__global__ void finish_kernel(const int* targets, const T* mx, const T* st, T* dlogits, T* loss, long vy, long v0,
                              long valid, T grad_scale) {
  const long i = blockIdx.x;
  const T sum = st[2 * i];
  T* d = dlogits + i * vy;
  const long tj = targets[i] - v0;
  const bool here = tj >= 0 && tj < valid;
  // The target's e is read before any thread rewrites the row.
  const T e_target = here ? d[tj] : T(0);
  __syncthreads();
  for (long j = threadIdx.x; j < vy; j += blockDim.x)
    if (j >= valid) d[j] = T(0);
    else if (!(here && j == tj)) d[j] = d[j] / sum * grad_scale;
  if (threadIdx.x == 0) {
    if (here) d[tj] = (e_target / sum - T(1)) * grad_scale;
    loss[i] = log(sum) + mx[i] - st[2 * i + 1];
  }
}

}  // namespace

template <typename T>
void cross_entropy_row_max(const T* logits, T* mx, long t, long vy, long valid, Stream s) {
  row_max_kernel<<<unsigned(t), kThreads, 0, s>>>(logits, mx, vy, valid);
}
template <typename T>
void cross_entropy_exp_sums(const T* logits, const int* targets, const T* mx, T* dlogits, T* st, long t, long vy,
                            long v0, long valid, Stream s) {
  exp_sums_kernel<<<unsigned(t), kThreads, 0, s>>>(logits, targets, mx, dlogits, st, vy, v0, valid);
}
template <typename T>
void cross_entropy_finish(const int* targets, const T* mx, const T* st, T* dlogits, T* loss, long t, long vy, long v0,
                          long valid, T grad_scale, Stream s) {
  finish_kernel<<<unsigned(t), kThreads, 0, s>>>(targets, mx, st, dlogits, loss, vy, v0, valid, grad_scale);
}

#define FF_CROSS_ENTROPY(T)                                                                                \
  template void cross_entropy_row_max<T>(const T*, T*, long, long, long, Stream);                         \
  template void cross_entropy_exp_sums<T>(const T*, const int*, const T*, T*, T*, long, long, long, long, \
                                          Stream);                                                        \
  template void cross_entropy_finish<T>(const int*, const T*, const T*, T*, T*, long, long, long, long, T, \
                                        Stream);
FF_CROSS_ENTROPY(float)
FF_CROSS_ENTROPY(double)

}  // namespace ff::cuda
