// SwiGLU on the GPU (kernels.hpp); the twin of llama_layers.hpp's, with the
// hardware's exp where the cpu has exp_poly. One thread per (token, column)
// of g; f's row is the gate columns, then the up columns. Computed in M.
#include "engine/cuda/kernels.hpp"
#include "engine/cuda/reduce.cuh"

namespace ff::cuda {

namespace {

template <typename M>
__device__ inline M sigmoid(M v) {
  return M(1) / (M(1) + exp(-v));
}

template <typename T, typename M = master_t<T>>
__global__ void swiglu_forward_kernel(const T* f, T* g, long t, long fy) {
  const long k = long(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= t * fy) return;
  const long i = k / fy, j = k % fy;
  const T* gate = f + i * 2 * fy;
  const M a = load(gate + j);
  store(g + k, a * sigmoid(a) * load(gate + fy + j));
}

template <typename T, typename M = master_t<T>>
__global__ void swiglu_backward_kernel(const T* f, const T* dg, T* df, long t, long fy) {
  const long k = long(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= t * fy) return;
  const long i = k / fy, j = k % fy;
  const T* gate = f + i * 2 * fy;
  T* dgate = df + i * 2 * fy;
  const M a = load(gate + j), s = sigmoid(a), d = load(dg + k);
  store(dgate + j, d * load(gate + fy + j) * s * (M(1) + a * (M(1) - s)));
  store(dgate + fy + j, d * a * s);
}

}  // namespace

template <typename T>
void swiglu_forward(const T* f, T* g, long t, long fy, Stream s) {
  if (t * fy > 0) swiglu_forward_kernel<<<blocks_for(t * fy), kThreads, 0, s>>>(f, g, t, fy);
}
template <typename T>
void swiglu_backward(const T* f, const T* dg, T* df, long t, long fy, Stream s) {
  if (t * fy > 0) swiglu_backward_kernel<<<blocks_for(t * fy), kThreads, 0, s>>>(f, dg, df, t, fy);
}

#define FF_SWIGLU(T)                                                        \
  template void swiglu_forward<T>(const T*, T*, long, long, Stream);        \
  template void swiglu_backward<T>(const T*, const T*, T*, long, long, Stream);
FF_SWIGLU(float)
FF_SWIGLU(double)
FF_SWIGLU(bf16)

}  // namespace ff::cuda
