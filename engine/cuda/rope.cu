// Rotary positions on the GPU (kernels.hpp); the twin of llama_layers.hpp's
// rope_rotate, in place on the Q and K heads of qkv (θ is the caller's: its
// kRopeTheta). One thread per (token, pair): the angle's cosine and sine, in
// double as on the cpu, serve every rotated head of that token; the rotation
// is computed in M.
#include "engine/cuda/kernels.hpp"
#include "engine/cuda/reduce.cuh"

namespace ff::cuda {

namespace {

template <typename T, typename M = master_t<T>>
__global__ void rope_kernel(T* qkv, long t, long S, long rotated, long ld, long dh, bool inverse, double theta) {
  const long half = dh / 2, k = long(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= t * half) return;
  const long i = k / half, j = k % half;
  const double angle = double(i % S) * pow(theta, -2.0 * double(j) / double(dh));
  const M c = M(cos(angle)), sn = M(inverse ? -sin(angle) : sin(angle));
  for (long h = 0; h < rotated; ++h) {
    T* x = qkv + i * ld + h * dh;
    const M a = load(x + j), b = load(x + j + half);
    store(x + j, a * c - b * sn);
    store(x + j + half, b * c + a * sn);
  }
}

}  // namespace

template <typename T>
void rope_rotate(T* qkv, long t, long S, long heads, long kv, long dh, bool inverse, double theta, Stream s) {
  const long half = dh / 2;
  if (t * half <= 0) return;
  rope_kernel<<<blocks_for(t * half), kThreads, 0, s>>>(qkv, t, S, heads + kv, (heads + 2 * kv) * dh, dh, inverse,
                                                           theta);
}

#define FF_ROPE(T) template void rope_rotate<T>(T*, long, long, long, long, long, bool, double, Stream);
FF_ROPE(float)
FF_ROPE(double)
FF_ROPE(bf16)

}  // namespace ff::cuda
