#pragma once
// One block's sum or max of one value per thread, for the row kernels (one
// block per token row). kThreads threads, a power of two.
#include <cuda_runtime.h>

namespace ff::cuda {

constexpr int kThreads = 256;

template <typename T, class Op>
__device__ T block_reduce(T v, Op op) {
  __shared__ T part[kThreads];
  part[threadIdx.x] = v;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (int(threadIdx.x) < half) part[threadIdx.x] = op(part[threadIdx.x], part[threadIdx.x + half]);
    __syncthreads();
  }
  T out = part[0];
  __syncthreads();  // part is reused by the next call
  return out;
}

struct Add {
  template <typename T> __device__ T operator()(T a, T b) const { return a + b; }
};
struct Max {
  template <typename T> __device__ T operator()(T a, T b) const { return a > b ? a : b; }
};

inline unsigned blocks_for(long n) { return unsigned((n + kThreads - 1) / kThreads); }

}  // namespace ff::cuda
