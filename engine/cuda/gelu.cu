// GELU on the GPU (kernels.hpp); the twin of layers.hpp's, with the
// hardware's tanh where the cpu has its exp_poly one.
#include "kernels.hpp"
#include "reduce.cuh"

namespace ff::cuda {

namespace {

template <typename T>
__global__ void gelu_forward_kernel(const T* x, T* y, long n) {
  const long i = long(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const T c = T(0.7978845608028654), k = T(0.044715), v = x[i];
  y[i] = T(0.5) * v * (T(1) + tanh(c * (v + k * v * v * v)));
}

template <typename T>
__global__ void gelu_backward_kernel(const T* x, const T* dy, T* dx, long n) {
  const long i = long(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const T c = T(0.7978845608028654), k = T(0.044715), v = x[i];
  const T th = tanh(c * (v + k * v * v * v));
  const T dth = (T(1) - th * th) * c * (T(1) + T(3) * k * v * v);
  dx[i] = dy[i] * (T(0.5) * (T(1) + th) + T(0.5) * v * dth);
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

template void gelu_forward<float>(const float*, float*, long, Stream);
template void gelu_forward<double>(const double*, double*, long, Stream);
template void gelu_backward<float>(const float*, const float*, float*, long, Stream);
template void gelu_backward<double>(const double*, const double*, double*, long, Stream);

}  // namespace ff::cuda
