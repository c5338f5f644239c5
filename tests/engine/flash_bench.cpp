// Times flash attention on the GPU against the unfused cuBLAS path at
// gpt-1.3b's shape (4 sequences of 2048 tokens, 16 heads of 128, bf16):
// not a test, a number to read. TFLOP/s count FlashAttention's way: forward
// 4·seqs·heads·S²·dh / 2 (two products, the causal half), backward 2.5×
// that (the same count for 32 heads of 64). Exits 77 where no GPU is
// usable, as the kernel tests do.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <random>
#include <vector>

#include "engine/cuda/kernels.hpp"
#include "engine/runtime/bf16.hpp"
#include "engine/runtime/cublas_api.hpp"
#include "engine/runtime/cuda_check.hpp"

namespace {

using ff::engine::bf16;

template <typename T>
T* device_random(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<T> h(n);
  for (T& x : h) x = T(d(rng));
  T* p = nullptr;
  CUDA_CHECK(cudaMalloc(&p, n * sizeof(T)));
  CUDA_CHECK(cudaMemcpy(p, h.data(), n * sizeof(T), cudaMemcpyHostToDevice));
  return p;
}

template <typename T>
T* device_buffer(size_t n) {
  T* p = nullptr;
  CUDA_CHECK(cudaMalloc(&p, n * sizeof(T)));
  return p;
}

// Median of 10 timed runs after two warm-ups, in seconds.
double median_seconds(const std::function<void()>& run) {
  cudaEvent_t start, stop;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  run();
  run();
  std::vector<double> t;
  for (int i = 0; i < 10; ++i) {
    CUDA_CHECK(cudaEventRecord(start));
    run();
    CUDA_CHECK(cudaEventRecord(stop));
    CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    t.push_back(ms * 1e-3);
  }
  CUDA_CHECK(cudaEventDestroy(start));
  CUDA_CHECK(cudaEventDestroy(stop));
  std::sort(t.begin(), t.end());
  return (t[4] + t[5]) / 2;
}

void report(const char* what, double seconds, double flops) {
  std::printf("%-34s %9.3f ms  %7.1f TFLOP/s\n", what, seconds * 1e3, flops / seconds * 1e-12);
}

}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no usable GPU: skipped\n");
    return 77;
  }
  const long seqs = 4, S = 2048, heads = 16, kv = 16, dh = 128, hy = heads * dh, ld = (heads + 2 * kv) * dh;
  const size_t tokens = size_t(seqs * S), rows = size_t(seqs * heads * S), SS = rows * size_t(S);
  auto* qkv = device_random<bf16>(tokens * size_t(ld), 1);
  auto* dout = device_random<bf16>(tokens * size_t(hy), 2);
  auto* out = device_buffer<bf16>(tokens * size_t(hy));
  auto* dqkv = device_buffer<bf16>(tokens * size_t(ld));
  auto* lse = device_buffer<float>(2 * rows);  // room for dh 64's twice the heads
  auto* delta = device_buffer<float>(2 * rows);
  const double forward_flops = 4.0 * seqs * heads * double(S) * S * dh / 2, backward_flops = 2.5 * forward_flops;
  std::printf("bf16, %ld sequences of %ld tokens, %ld heads of %ld\n", seqs, S, heads, dh);
  report("flash forward", median_seconds([&] {
           ff::cuda::flash_attention_forward(qkv, out, lse, seqs, S, heads, kv, dh, nullptr);
         }),
         forward_flops);
  report("flash backward", median_seconds([&] {
           ff::cuda::flash_attention_backward(qkv, out, lse, dout, dqkv, delta, seqs, S, heads, kv, dh, nullptr);
         }),
         backward_flops);
  {  // the same width as 32 heads of 64, the other tensor-core size
    const long heads64 = 2 * heads, dh64 = dh / 2;
    report("flash forward, 32 heads of 64", median_seconds([&] {
             ff::cuda::flash_attention_forward(qkv, out, lse, seqs, S, heads64, heads64, dh64, nullptr);
           }),
           forward_flops);
    report("flash backward, 32 heads of 64", median_seconds([&] {
             ff::cuda::flash_attention_backward(qkv, out, lse, dout, dqkv, delta, seqs, S, heads64, heads64, dh64,
                                                nullptr);
           }),
           backward_flops);
  }
  // The unfused path computes both triangles and keeps S² probabilities;
  // counted with the same flops, so the rates compare times.
  auto* probs = device_buffer<bf16>(SS);
  auto* dscores = device_buffer<bf16>(SS);
  auto* scores = device_buffer<float>(SS);
  cublasHandle_t h;
  CUBLAS_CHECK(ff::cuda::cublas().create(&h));
  report("unfused (cuBLAS) forward", median_seconds([&] {
           ff::cuda::attention_forward(h, qkv, out, probs, scores, seqs, S, heads, kv, dh, nullptr);
         }),
         forward_flops);
  report("unfused (cuBLAS) backward", median_seconds([&] {
           ff::cuda::attention_backward(h, qkv, probs, dout, dqkv, scores, dscores, seqs, S, heads, kv, dh, nullptr);
         }),
         backward_flops);
  CUBLAS_CHECK(ff::cuda::cublas().destroy(h));
  for (void* p : {static_cast<void*>(qkv), static_cast<void*>(dout), static_cast<void*>(out),
                  static_cast<void*>(dqkv), static_cast<void*>(lse), static_cast<void*>(delta),
                  static_cast<void*>(probs), static_cast<void*>(dscores), static_cast<void*>(scores)})
    CUDA_CHECK(cudaFree(p));
  return 0;
}
