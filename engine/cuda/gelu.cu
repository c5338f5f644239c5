// GELU on the GPU (kernels.hpp); the twin of layers.hpp's, with the
// hardware's tanh where the cpu has its exp_poly one. Computed in M.
#include "engine/cuda/kernels.hpp"
#include "engine/cuda/reduce.cuh"

namespace ff::cuda {

namespace {

template <typename T, typename M = master_t<T>>
__global__ void gelu_forward_kernel(const T* x, T* y, long n) {
  const long i = long(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const M c = M(0.7978845608028654), k = M(0.044715), v = load(x + i);
  store(y + i, M(0.5) * v * (M(1) + tanh(c * (v + k * v * v * v))));
}

template <typename T, typename M = master_t<T>>
__global__ void gelu_backward_kernel(const T* x, const T* dy, T* dx, long n) {
  const long i = long(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const M c = M(0.7978845608028654), k = M(0.044715), v = load(x + i);
  const M th = tanh(c * (v + k * v * v * v));
  const M dth = (M(1) - th * th) * c * (M(1) + M(3) * k * v * v);
  store(dx + i, load(dy + i) * (M(0.5) * (M(1) + th) + M(0.5) * v * dth));
}

}  // namespace

template <typename T>
void gelu_forward(const T* x, T* y, long n, Stream s) {
  if (n > 0) gelu_forward_kernel<<<blocks_for(n), kThreads, 0, s>>>(x, y, n);
}
template <typename T>
void gelu_backward(const T* x, const T* dy, T* dx, long n, Stream s) {
  if (n > 0) gelu_backward_kernel<<<blocks_for(n), kThreads, 0, s>>>(x, dy, dx, n);
}

#define FF_GELU(T)                                                    \
  template void gelu_forward<T>(const T*, T*, long, Stream);          \
  template void gelu_backward<T>(const T*, const T*, T*, long, Stream);
FF_GELU(float)
FF_GELU(double)
FF_GELU(bf16)

}  // namespace ff::cuda
