#include "measure/hiding_kernels.hpp"

namespace ff::measure {

namespace {

constexpr int kBlockThreads = 512;

__global__ void copy_blocks_kernel(const float4* src, float4* dst, size_t n4, int rounds) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (int r = 0; r < rounds; ++r)
    for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n4; i += stride) dst[i] = src[i];
}

__global__ void hold_kernel(long long cycles) {
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
}

}  // namespace

void copy_on_blocks(const float* src, float* dst, size_t n, int blocks, int rounds, cudaStream_t s) {
  if (n >= 4 && blocks > 0 && rounds > 0)
    copy_blocks_kernel<<<unsigned(blocks), kBlockThreads, 0, s>>>(reinterpret_cast<const float4*>(src),
                                                                  reinterpret_cast<float4*>(dst), n / 4, rounds);
}

void hold_blocks(int blocks, long long cycles, cudaStream_t s) {
  if (blocks > 0 && cycles > 0) hold_kernel<<<unsigned(blocks), kBlockThreads, 0, s>>>(cycles);
}

}  // namespace ff::measure
