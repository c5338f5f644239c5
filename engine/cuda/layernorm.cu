// LayerNorm's local steps on the GPU (kernels.hpp); the twin of layers.hpp.
// Row kernels: one block per token, its threads striding over the hx columns.
// Statistics in M; x̂ and y rounded to T from the same unrounded value. On
// whole rows, the fused kernels of norm_rows.cuh.
#include "engine/cuda/kernels.hpp"
#include "engine/cuda/norm_rows.cuh"
#include "engine/cuda/reduce.cuh"

namespace ff::cuda {

namespace {

constexpr double kLayerNormEps = 1e-5;  // layers.hpp's

template <typename T, typename M = master_t<T>>
__global__ void row_sums_kernel(const T* x, M* sum, long hx) {
  const T* xr = x + blockIdx.x * hx;
  M acc = 0;
  for (long j = threadIdx.x; j < hx; j += blockDim.x) acc += load(xr + j);
  acc = block_reduce(acc, Add{});
  if (threadIdx.x == 0) sum[blockIdx.x] = acc;
}

template <typename T, typename M = master_t<T>>
__global__ void centred_squares_kernel(const T* x, const M* sum, M* mean, M* sq, long hx, long H) {
  const T* xr = x + blockIdx.x * hx;
  const M m = sum[blockIdx.x] / M(H);
  M acc = 0;
  for (long j = threadIdx.x; j < hx; j += blockDim.x) {
    const M d = load(xr + j) - m;
    acc += d * d;
  }
  acc = block_reduce(acc, Add{});
  if (threadIdx.x == 0) mean[blockIdx.x] = m, sq[blockIdx.x] = acc;
}

template <typename T, typename M = master_t<T>>
__global__ void normalize_kernel(const T* x, const M* mean, const M* sq, const T* gamma, const T* beta, T* y,
                                 T* xhat, M* rstd, long hx, long H) {
  const long i = blockIdx.x;
  const M r = M(1) / sqrt(sq[i] / M(H) + M(kLayerNormEps)), m = mean[i];
  if (threadIdx.x == 0) rstd[i] = r;
  for (long j = threadIdx.x; j < hx; j += blockDim.x) {
    const M v = (load(x + i * hx + j) - m) * r;
    store(xhat + i * hx + j, v);
    store(y + i * hx + j, v * load(gamma + j) + load(beta + j));
  }
}

template <typename T, typename M = master_t<T>>
__global__ void backward_sums_kernel(const T* dy, const T* xhat, const T* gamma, M* stat, long hx) {
  const long i = blockIdx.x;
  M a = 0, b = 0;
  for (long j = threadIdx.x; j < hx; j += blockDim.x) {
    const M g = load(dy + i * hx + j) * load(gamma + j);
    a += g;
    b += g * load(xhat + i * hx + j);
  }
  a = block_reduce(a, Add{});
  b = block_reduce(b, Add{});
  if (threadIdx.x == 0) stat[2 * i] = a, stat[2 * i + 1] = b;
}

template <typename T, typename M = master_t<T>>
__global__ void backward_dx_kernel(const T* dy, const T* xhat, const M* rstd, const T* gamma, const M* stat, T* dx,
                                   long hx, long H) {
  const long i = blockIdx.x;
  const M ma = stat[2 * i] / M(H), mb = stat[2 * i + 1] / M(H), r = rstd[i];
  for (long j = threadIdx.x; j < hx; j += blockDim.x)
    store(dx + i * hx + j, r * (load(dy + i * hx + j) * load(gamma + j) - ma - load(xhat + i * hx + j) * mb));
}

}  // namespace

template <typename T>
void layernorm_row_sums(const T* x, master_t<T>* sum, long t, long hx, Stream s) {
  row_sums_kernel<<<unsigned(t), kThreads, 0, s>>>(x, sum, hx);
}
template <typename T>
void layernorm_centred_squares(const T* x, const master_t<T>* sum, master_t<T>* mean, master_t<T>* sq, long t,
                               long hx, long H, Stream s) {
  centred_squares_kernel<<<unsigned(t), kThreads, 0, s>>>(x, sum, mean, sq, hx, H);
}
template <typename T>
void layernorm_normalize(const T* x, const master_t<T>* mean, const master_t<T>* sq, const T* gamma, const T* beta,
                         T* y, T* xhat, master_t<T>* rstd, long t, long hx, long H, Stream s) {
  normalize_kernel<<<unsigned(t), kThreads, 0, s>>>(x, mean, sq, gamma, beta, y, xhat, rstd, hx, H);
}
template <typename T>
void layernorm_backward_sums(const T* dy, const T* xhat, const T* gamma, master_t<T>* stat, long t, long hx,
                             Stream s) {
  backward_sums_kernel<<<unsigned(t), kThreads, 0, s>>>(dy, xhat, gamma, stat, hx);
}
template <typename T>
void layernorm_backward_apply(const T* dy, const T* xhat, const master_t<T>* rstd, const T* gamma,
                              const master_t<T>* stat, T* dx, master_t<T>* dgamma, master_t<T>* dbeta, long t,
                              long hx, long H, Stream s) {
  backward_dx_kernel<<<unsigned(t), kThreads, 0, s>>>(dy, xhat, rstd, gamma, stat, dx, hx, H);
  add_column_sums(ElementProduct<T>{dy, xhat, hx}, t, hx, dgamma, s);  // dγ = Σ_tokens dy·x̂, deterministic
  add_column_sums(Element<T>{dy, hx}, t, hx, dbeta, s);
}

template <typename T>
void layernorm_forward(const T* x, const T* gamma, const T* beta, T* y, T* xhat, master_t<T>* rstd, long t, long H,
                       Stream s) {
  fused_norm_forward<true>(x, gamma, beta, y, xhat, rstd, t, H, kLayerNormEps, s);
}
template <typename T>
void layernorm_backward(const T* dy, const T* xhat, const master_t<T>* rstd, const T* gamma, T* dx,
                        master_t<T>* dgamma, master_t<T>* dbeta, long t, long H, Stream s) {
  fused_norm_backward<true>(dy, xhat, rstd, gamma, dx, dgamma, dbeta, t, H, s);
}

#define FF_LAYERNORM(T, M)                                                                                       \
  template void layernorm_row_sums<T>(const T*, M*, long, long, Stream);                                        \
  template void layernorm_centred_squares<T>(const T*, const M*, M*, M*, long, long, long, Stream);             \
  template void layernorm_normalize<T>(const T*, const M*, const M*, const T*, const T*, T*, T*, M*, long, long, \
                                       long, Stream);                                                           \
  template void layernorm_backward_sums<T>(const T*, const T*, const T*, M*, long, long, Stream);               \
  template void layernorm_backward_apply<T>(const T*, const T*, const M*, const T*, const M*, T*, M*, M*, long, \
                                            long, long, Stream);                                                \
  template void layernorm_forward<T>(const T*, const T*, const T*, T*, T*, M*, long, long, Stream);             \
  template void layernorm_backward<T>(const T*, const T*, const M*, const T*, T*, M*, M*, long, long, Stream);
FF_LAYERNORM(float, float)
FF_LAYERNORM(double, double)
FF_LAYERNORM(bf16, float)

}  // namespace ff::cuda
