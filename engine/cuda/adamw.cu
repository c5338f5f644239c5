// AdamW on the GPU (kernels.hpp); the twin of adamw.hpp's adamw_update: one
// thread per parameter, the gradient left zero.
#include "kernels.hpp"
#include "reduce.cuh"

namespace ff::cuda {

namespace {

template <typename T>
__global__ void adamw_kernel(T* w, T* g, T* m, T* v, size_t n, engine::AdamWStep<T> s) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const T gi = g[i] * s.clip;
  const T mi = s.beta1 * m[i] + (T(1) - s.beta1) * gi;
  const T vi = s.beta2 * v[i] + (T(1) - s.beta2) * gi * gi;
  m[i] = mi;
  v[i] = vi;
  w[i] -= s.lr * ((mi * s.c1) / (sqrt(vi * s.c2) + s.eps) + s.decay * w[i]);
  g[i] = T(0);
}

}  // namespace

template <typename T>
void adamw_update(T* w, T* g, T* m, T* v, size_t n, const engine::AdamWStep<T>& step, Stream s) {
  if (n > 0) adamw_kernel<<<blocks_for(long(n)), kThreads, 0, s>>>(w, g, m, v, n, step);
}

template void adamw_update<float>(float*, float*, float*, float*, size_t, const engine::AdamWStep<float>&, Stream);
template void adamw_update<double>(double*, double*, double*, double*, size_t, const engine::AdamWStep<double>&,
                                   Stream);

}  // namespace ff::cuda
