// LayerNorm's local steps on the GPU (kernels.hpp); the twin of layers.hpp.
// Row kernels: one block per token, its threads striding over the hx columns.
#include "kernels.hpp"
#include "reduce.cuh"

namespace ff::cuda {

namespace {

constexpr double kLayerNormEps = 1e-5;  // layers.hpp's

template <typename T>
__global__ void row_sums_kernel(const T* x, T* sum, long hx) {
  const T* xr = x + blockIdx.x * hx;
  T acc = 0;
  for (long j = threadIdx.x; j < hx; j += blockDim.x) acc += xr[j];
  acc = block_reduce(acc, Add{});
  if (threadIdx.x == 0) sum[blockIdx.x] = acc;
}

template <typename T>
__global__ void centred_squares_kernel(const T* x, const T* sum, T* mean, T* sq, long hx, long H) {
  const T* xr = x + blockIdx.x * hx;
  const T m = sum[blockIdx.x] / T(H);
  T acc = 0;
  for (long j = threadIdx.x; j < hx; j += blockDim.x) acc += (xr[j] - m) * (xr[j] - m);
  acc = block_reduce(acc, Add{});
  if (threadIdx.x == 0) mean[blockIdx.x] = m, sq[blockIdx.x] = acc;
}

template <typename T>
__global__ void normalize_kernel(const T* x, const T* mean, const T* sq, const T* gamma, const T* beta, T* y,
                                 T* xhat, T* rstd, long hx, long H) {
  const long i = blockIdx.x;
  const T r = T(1) / sqrt(sq[i] / T(H) + T(kLayerNormEps)), m = mean[i];
  if (threadIdx.x == 0) rstd[i] = r;
  for (long j = threadIdx.x; j < hx; j += blockDim.x) {
    const T v = (x[i * hx + j] - m) * r;
    xhat[i * hx + j] = v;
    y[i * hx + j] = v * gamma[j] + beta[j];
  }
}

template <typename T>
__global__ void backward_sums_kernel(const T* dy, const T* xhat, const T* gamma, T* stat, long hx) {
  const long i = blockIdx.x;
  T a = 0, b = 0;
  for (long j = threadIdx.x; j < hx; j += blockDim.x) {
    const T g = dy[i * hx + j] * gamma[j];
    a += g;
    b += g * xhat[i * hx + j];
  }
  a = block_reduce(a, Add{});
  b = block_reduce(b, Add{});
  if (threadIdx.x == 0) stat[2 * i] = a, stat[2 * i + 1] = b;
}

template <typename T>
__global__ void backward_dx_kernel(const T* dy, const T* xhat, const T* rstd, const T* gamma, const T* stat, T* dx,
                                   long hx, long H) {
  const long i = blockIdx.x;
  const T ma = stat[2 * i] / T(H), mb = stat[2 * i + 1] / T(H), r = rstd[i];
  for (long j = threadIdx.x; j < hx; j += blockDim.x)
    dx[i * hx + j] = r * (dy[i * hx + j] * gamma[j] - ma - xhat[i * hx + j] * mb);
}

}  // namespace

template <typename T>
void layernorm_row_sums(const T* x, T* sum, long t, long hx, Stream s) {
  row_sums_kernel<<<unsigned(t), kThreads, 0, s>>>(x, sum, hx);
}
template <typename T>
void layernorm_centred_squares(const T* x, const T* sum, T* mean, T* sq, long t, long hx, long H, Stream s) {
  centred_squares_kernel<<<unsigned(t), kThreads, 0, s>>>(x, sum, mean, sq, hx, H);
}
template <typename T>
void layernorm_normalize(const T* x, const T* mean, const T* sq, const T* gamma, const T* beta, T* y, T* xhat,
                         T* rstd, long t, long hx, long H, Stream s) {
  normalize_kernel<<<unsigned(t), kThreads, 0, s>>>(x, mean, sq, gamma, beta, y, xhat, rstd, hx, H);
}
template <typename T>
void layernorm_backward_sums(const T* dy, const T* xhat, const T* gamma, T* stat, long t, long hx, Stream s) {
  backward_sums_kernel<<<unsigned(t), kThreads, 0, s>>>(dy, xhat, gamma, stat, hx);
}
template <typename T>
void layernorm_backward_apply(const T* dy, const T* xhat, const T* rstd, const T* gamma, const T* stat, T* dx,
                              T* dgamma, T* dbeta, long t, long hx, long H, Stream s) {
  backward_dx_kernel<<<unsigned(t), kThreads, 0, s>>>(dy, xhat, rstd, gamma, stat, dx, hx, H);
  add_column_sums(ElementProduct<T>{dy, xhat, hx}, t, hx, dgamma, s);  // dγ = Σ_tokens dy·x̂, deterministic
  add_column_sums(Element<T>{dy, hx}, t, hx, dbeta, s);
}

#define FF_LAYERNORM(T)                                                                                          \
  template void layernorm_row_sums<T>(const T*, T*, long, long, Stream);                                        \
  template void layernorm_centred_squares<T>(const T*, const T*, T*, T*, long, long, long, Stream);             \
  template void layernorm_normalize<T>(const T*, const T*, const T*, const T*, const T*, T*, T*, T*, long, long, \
                                       long, Stream);                                                           \
  template void layernorm_backward_sums<T>(const T*, const T*, const T*, T*, long, long, Stream);               \
  template void layernorm_backward_apply<T>(const T*, const T*, const T*, const T*, const T*, T*, T*, T*, long, \
                                            long, long, Stream);
FF_LAYERNORM(float)
FF_LAYERNORM(double)

}  // namespace ff::cuda
