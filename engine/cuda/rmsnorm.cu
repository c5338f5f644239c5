// RMSNorm's local steps on the GPU (kernels.hpp); the twin of
// llama_layers.hpp's. Row kernels as LayerNorm's (layernorm.cu): one block
// per token, its threads striding over the hx columns. Statistics in M; x̂
// and y rounded to T from the same unrounded value. On whole rows, the fused
// kernels of norm_rows.cuh.
#include "engine/cuda/kernels.hpp"
#include "engine/cuda/norm_rows.cuh"
#include "engine/cuda/reduce.cuh"

namespace ff::cuda {

namespace {

constexpr double kRmsNormEps = 1e-5;  // layers.hpp's kLayerNormEps, which the cpu's RMSNorm uses

template <typename T, typename M = master_t<T>>
__global__ void row_squares_kernel(const T* x, M* sq, long hx) {
  const T* xr = x + blockIdx.x * hx;
  M acc = 0;
  for (long j = threadIdx.x; j < hx; j += blockDim.x) {
    const M v = load(xr + j);
    acc += v * v;
  }
  acc = block_reduce(acc, Add{});
  if (threadIdx.x == 0) sq[blockIdx.x] = acc;
}

template <typename T, typename M = master_t<T>>
__global__ void normalize_kernel(const T* x, const M* sq, const T* gamma, T* y, T* xhat, M* rstd, long hx, long H) {
  const long i = blockIdx.x;
  const M r = M(1) / sqrt(sq[i] / M(H) + M(kRmsNormEps));
  if (threadIdx.x == 0) rstd[i] = r;
  for (long j = threadIdx.x; j < hx; j += blockDim.x) {
    const M v = load(x + i * hx + j) * r;
    store(xhat + i * hx + j, v);
    store(y + i * hx + j, v * load(gamma + j));
  }
}

template <typename T, typename M = master_t<T>>
__global__ void backward_sums_kernel(const T* dy, const T* xhat, const T* gamma, M* stat, long hx) {
  const long i = blockIdx.x;
  M acc = 0;
  for (long j = threadIdx.x; j < hx; j += blockDim.x)
    acc += load(dy + i * hx + j) * load(gamma + j) * load(xhat + i * hx + j);
  acc = block_reduce(acc, Add{});
  if (threadIdx.x == 0) stat[i] = acc;
}

template <typename T, typename M = master_t<T>>
__global__ void backward_dx_kernel(const T* dy, const T* xhat, const M* rstd, const T* gamma, const M* stat, T* dx,
                                   long hx, long H) {
  const long i = blockIdx.x;
  const M mb = stat[i] / M(H), r = rstd[i];
  for (long j = threadIdx.x; j < hx; j += blockDim.x)
    store(dx + i * hx + j, r * (load(dy + i * hx + j) * load(gamma + j) - load(xhat + i * hx + j) * mb));
}

}  // namespace

template <typename T>
void rmsnorm_row_squares(const T* x, master_t<T>* sq, long t, long hx, Stream s) {
  if (t > 0) row_squares_kernel<<<unsigned(t), kThreads, 0, s>>>(x, sq, hx);
}
template <typename T>
void rmsnorm_normalize(const T* x, const master_t<T>* sq, const T* gamma, T* y, T* xhat, master_t<T>* rstd, long t,
                       long hx, long H, Stream s) {
  if (t > 0) normalize_kernel<<<unsigned(t), kThreads, 0, s>>>(x, sq, gamma, y, xhat, rstd, hx, H);
}
template <typename T>
void rmsnorm_backward_sums(const T* dy, const T* xhat, const T* gamma, master_t<T>* stat, long t, long hx, Stream s) {
  if (t > 0) backward_sums_kernel<<<unsigned(t), kThreads, 0, s>>>(dy, xhat, gamma, stat, hx);
}
template <typename T>
void rmsnorm_backward_apply(const T* dy, const T* xhat, const master_t<T>* rstd, const T* gamma,
                            const master_t<T>* stat, T* dx, master_t<T>* dgamma, long t, long hx, long H, Stream s) {
  if (t <= 0) return;
  backward_dx_kernel<<<unsigned(t), kThreads, 0, s>>>(dy, xhat, rstd, gamma, stat, dx, hx, H);
  add_column_sums(ElementProduct<T>{dy, xhat, hx}, t, hx, dgamma, s);  // dγ = Σ_tokens dy·x̂, deterministic
}

template <typename T>
void rmsnorm_forward(const T* x, const T* gamma, T* y, T* xhat, master_t<T>* rstd, long t, long H, Stream s) {
  fused_norm_forward<false>(x, gamma, static_cast<const T*>(nullptr), y, xhat, rstd, t, H, kRmsNormEps, s);
}
template <typename T>
void rmsnorm_backward(const T* dy, const T* xhat, const master_t<T>* rstd, const T* gamma, T* dx, master_t<T>* dgamma,
                      long t, long H, Stream s) {
  fused_norm_backward<false>(dy, xhat, rstd, gamma, dx, dgamma, static_cast<master_t<T>*>(nullptr), t, H, s);
}

#define FF_RMSNORM(T, M)                                                                                        \
  template void rmsnorm_row_squares<T>(const T*, M*, long, long, Stream);                                       \
  template void rmsnorm_normalize<T>(const T*, const M*, const T*, T*, T*, M*, long, long, long, Stream);       \
  template void rmsnorm_backward_sums<T>(const T*, const T*, const T*, M*, long, long, Stream);                 \
  template void rmsnorm_backward_apply<T>(const T*, const T*, const M*, const T*, const M*, T*, M*, long, long, \
                                          long, Stream);                                                        \
  template void rmsnorm_forward<T>(const T*, const T*, T*, T*, M*, long, long, Stream);                         \
  template void rmsnorm_backward<T>(const T*, const T*, const M*, const T*, T*, M*, long, long, Stream);
FF_RMSNORM(float, float)
FF_RMSNORM(double, double)
FF_RMSNORM(bf16, float)

}  // namespace ff::cuda
