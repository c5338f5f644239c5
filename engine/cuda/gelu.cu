// GELU on the GPU (kernels.hpp); the twin of layers.hpp's, with the
// hardware's tanh where the cpu has its exp_poly one. Computed in M.
#include "engine/cuda/kernels.hpp"
#include "engine/cuda/reduce.cuh"

namespace ff::cuda {

namespace {

template <typename M>
__device__ inline M gelu(M v) {
  const M c = M(0.7978845608028654), k = M(0.044715);
  return M(0.5) * v * (M(1) + tanh(c * (v + k * v * v * v)));
}
template <typename M>
__device__ inline M gelu_grad(M v) {
  const M c = M(0.7978845608028654), k = M(0.044715);
  const M th = tanh(c * (v + k * v * v * v));
  const M dth = (M(1) - th * th) * c * (M(1) + M(3) * k * v * v);
  return M(0.5) * (M(1) + th) + M(0.5) * v * dth;
}

template <typename T, typename M = master_t<T>>
__global__ void gelu_forward_kernel(const T* x, T* y, long n, bool aligned) {
  const Pack<T> p(size_t(n), aligned);
  M v[kPack<T>];
  load_pack(x + p.i0, v, p.count, p.vec);
#pragma unroll
  for (int k = 0; k < kPack<T>; ++k) v[k] = gelu(v[k]);
  store_pack(y + p.i0, v, p.count, p.vec);
}

template <typename T, typename M = master_t<T>>
__global__ void gelu_backward_kernel(const T* x, const T* dy, T* dx, long n, bool aligned) {
  const Pack<T> p(size_t(n), aligned);
  M v[kPack<T>], d[kPack<T>];
  load_pack(x + p.i0, v, p.count, p.vec);
  load_pack(dy + p.i0, d, p.count, p.vec);
#pragma unroll
  for (int k = 0; k < kPack<T>; ++k) v[k] = d[k] * gelu_grad(v[k]);
  store_pack(dx + p.i0, v, p.count, p.vec);
}

}  // namespace

template <typename T>
void gelu_forward(const T* x, T* y, long n, Stream s) {
  if (n > 0)
    gelu_forward_kernel<<<pack_blocks<T>(size_t(n)), kThreads, 0, s>>>(x, y, n, aligned16({x, y}));
}
template <typename T>
void gelu_backward(const T* x, const T* dy, T* dx, long n, Stream s) {
  if (n > 0)
    gelu_backward_kernel<<<pack_blocks<T>(size_t(n)), kThreads, 0, s>>>(x, dy, dx, n,
                                                                                          aligned16({x, dy, dx}));
}

#define FF_GELU(T)                                                    \
  template void gelu_forward<T>(const T*, T*, long, Stream);          \
  template void gelu_backward<T>(const T*, const T*, T*, long, Stream);
FF_GELU(float)
FF_GELU(double)
FF_GELU(bf16)

}  // namespace ff::cuda
