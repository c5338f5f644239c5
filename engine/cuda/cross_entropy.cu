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

template <typename T, typename M = master_t<T>>
__global__ void row_max_kernel(const T* logits, M* mx, long vy, long valid) {
  const T* l = logits + blockIdx.x * vy;
  M m = lowest<M>();
  for (long j = threadIdx.x; j < valid; j += blockDim.x) {
    const M lj = load(l + j);
    m = lj > m ? lj : m;
  }
  m = block_reduce(m, Max{});
  if (threadIdx.x == 0) mx[blockIdx.x] = valid > 0 ? m : M(-INFINITY);
}

// The sum is of the unrounded e, as the cpu's.
template <typename T, typename M = master_t<T>>
__global__ void exp_sums_kernel(const T* logits, const int* targets, const M* mx, T* dlogits, M* st, long vy, long v0,
                                long valid) {
  const long i = blockIdx.x;
  const T* l = logits + i * vy;
  T* e = dlogits + i * vy;
  const M m = mx[i];
  M acc = 0;
  for (long j = threadIdx.x; j < valid; j += blockDim.x) {
    const M ej = exp(load(l + j) - m);
    store(e + j, ej);
    acc += ej;
  }
  acc = block_reduce(acc, Add{});
  if (threadIdx.x == 0) {
    const long tj = targets[i] - v0;
    st[2 * i] = acc;
    st[2 * i + 1] = (tj >= 0 && tj < vy) ? load(l + tj) : M(0);
  }
}

template <typename T, typename M = master_t<T>>
__global__ void finish_kernel(const int* targets, const M* mx, const M* st, T* dlogits, M* loss, long vy, long v0,
                              long valid, M grad_scale) {
  const long i = blockIdx.x;
  const M sum = st[2 * i];
  T* d = dlogits + i * vy;
  const long tj = targets[i] - v0;
  const bool here = tj >= 0 && tj < valid;
  // The target's e is read before any thread rewrites the row.
  const M e_target = here ? load(d + tj) : M(0);
  __syncthreads();
  for (long j = threadIdx.x; j < vy; j += blockDim.x)
    if (j >= valid) store(d + j, M(0));
    else if (!(here && j == tj)) store(d + j, load(d + j) / sum * grad_scale);
  if (threadIdx.x == 0) {
    if (here) store(d + tj, (e_target / sum - M(1)) * grad_scale);
    loss[i] = log(sum) + mx[i] - st[2 * i + 1];
  }
}

}  // namespace

template <typename T>
void cross_entropy_row_max(const T* logits, master_t<T>* mx, long t, long vy, long valid, Stream s) {
  row_max_kernel<<<unsigned(t), kThreads, 0, s>>>(logits, mx, vy, valid);
}
template <typename T>
void cross_entropy_exp_sums(const T* logits, const int* targets, const master_t<T>* mx, T* dlogits, master_t<T>* st,
                            long t, long vy, long v0, long valid, Stream s) {
  exp_sums_kernel<<<unsigned(t), kThreads, 0, s>>>(logits, targets, mx, dlogits, st, vy, v0, valid);
}
template <typename T>
void cross_entropy_finish(const int* targets, const master_t<T>* mx, const master_t<T>* st, T* dlogits,
                          master_t<T>* loss, long t, long vy, long v0, long valid, master_t<T> grad_scale, Stream s) {
  finish_kernel<<<unsigned(t), kThreads, 0, s>>>(targets, mx, st, dlogits, loss, vy, v0, valid, grad_scale);
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
