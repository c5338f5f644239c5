// AdamW on the GPU (kernels.hpp); the twin of adamw.hpp's adamw_update: one
// thread per parameter, on the master (M), the gradient left zero, and the
// result rounded into the weight in T where there is one.
#include "engine/cuda/kernels.hpp"
#include "engine/cuda/reduce.cuh"

namespace ff::cuda {

namespace {

template <typename T, typename M = master_t<T>>
__global__ void adamw_kernel(M* master, M* g, M* m, M* v, T* w, size_t n, engine::AdamWStep<M> s) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const M gi = g[i] * s.clip;
  const M mi = s.beta1 * m[i] + (M(1) - s.beta1) * gi;
  const M vi = s.beta2 * v[i] + (M(1) - s.beta2) * gi * gi;
  m[i] = mi;
  v[i] = vi;
  M p = master[i];
  p -= s.lr * ((mi * s.c1) / (sqrt(vi * s.c2) + s.eps) + s.decay * p);
  master[i] = p;
  if (w) store(w + i, p);
  g[i] = M(0);
}

}  // namespace

template <typename T>
void adamw_update(master_t<T>* master, master_t<T>* g, master_t<T>* m, master_t<T>* v, T* w, size_t n,
                  const engine::AdamWStep<master_t<T>>& step, Stream s) {
  if (n > 0) adamw_kernel<<<blocks_for(long(n)), kThreads, 0, s>>>(master, g, m, v, w, n, step);
}

#define FF_ADAMW(T, M) \
  template void adamw_update<T>(M*, M*, M*, M*, T*, size_t, const engine::AdamWStep<M>&, Stream);
FF_ADAMW(float, float)
FF_ADAMW(double, double)
FF_ADAMW(bf16, float)

}  // namespace ff::cuda
