// cuBLAS GEMM throughput: bf16 inputs, fp32 accumulation, as training runs.
// Host APIs only (buffers filled with cudaMemset), so no nvcc is needed.
#include <mpi.h>

#include <algorithm>
#include <vector>

#include "engine/runtime/cublas_api.hpp"
#include "engine/runtime/cublas_gemm.hpp"
#include "engine/runtime/cuda_check.hpp"
#include "measure/gemm.hpp"
#include "measure/harness.hpp"
#include "measure/stream.hpp"

namespace ff::measure {

std::vector<ff::GemmSample> measure_gemm_cuda(const std::vector<GemmShape>& shapes, int repeats,
                                              const GemmProgress& progress) {
  cublasHandle_t handle;
  CUBLAS_CHECK(ff::cuda::cublas().create(&handle));
  int device = 0, l2 = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device));
  auto samples = sweep_gemm(shapes, repeats, progress, [&](const GemmShape& s) {
    // A weight gradient ("tn") goes into its fp32 accumulator, β = 1, as the
    // engine and Megatron's gradient-accumulation fusion run it: C read and
    // written in fp32, not written once in bf16.
    const bool to_fp32 = s.layout == "tn";
    const size_t a_bytes = size_t(s.m * s.k) * 2, b_bytes = size_t(s.k * s.n) * 2,
                 c_bytes = size_t(s.m * s.n) * (to_fp32 ? 4 : 2);
    // As many sets of operands as take twice the L2, used in turn: a GEMM
    // in a training step finds its operands in memory, not in the cache.
    const int sets = int(std::clamp<size_t>((2 * size_t(l2) + a_bytes + b_bytes + c_bytes - 1) /
                                                (a_bytes + b_bytes + c_bytes), 1, 64));
    std::vector<void*> a(sets), b(sets), c(sets);
    for (int i = 0; i < sets; ++i) {
      CUDA_CHECK(cudaMalloc(&a[i], a_bytes));
      CUDA_CHECK(cudaMalloc(&b[i], b_bytes));
      CUDA_CHECK(cudaMalloc(&c[i], c_bytes));
      CUDA_CHECK(cudaMemset(c[i], 0, c_bytes));
      // Every byte 0x3c: each bf16 is 0x3c3c ≈ 0.0115, a normal number (no denormal slow paths).
      CUDA_CHECK(cudaMemset(a[i], 0x3c, a_bytes));
      CUDA_CHECK(cudaMemset(b[i], 0x3c, b_bytes));
    }
    const bool ta = s.layout[0] == 't', tb = s.layout[1] == 't';
    const int lda = int(ta ? s.m : s.k), ldb = int(tb ? s.k : s.n);
    int next = 0;
    auto call = [&] {
      const int i = next;
      next = (next + 1) % sets;
      if (to_fp32)
        ff::cuda::gemm(handle, ta, tb, int(s.m), int(s.n), int(s.k), 1.0f, static_cast<const engine::bf16*>(a[i]),
                       lda, static_cast<const engine::bf16*>(b[i]), ldb, 1.0f, static_cast<float*>(c[i]), int(s.n));
      else
        ff::cuda::gemm_bf16(handle, ta, tb, int(s.m), int(s.n), int(s.k), 1.0f, a[i], lda, b[i], ldb, 0.0f, c[i],
                            int(s.n));
    };
    call();
    CUDA_CHECK(cudaDeviceSynchronize());
    int calls = gemm_calls(s, 2e11);  // ~1 ms of an A100
    double t = time_all_ranks([&] {
      for (int j = 0; j < calls; ++j) call();
      CUDA_CHECK(cudaDeviceSynchronize());
    });
    for (int i = 0; i < sets; ++i) {
      CUDA_CHECK(cudaFree(a[i]));
      CUDA_CHECK(cudaFree(b[i]));
      CUDA_CHECK(cudaFree(c[i]));
    }
    return t / calls;
  });
  CUBLAS_CHECK(ff::cuda::cublas().destroy(handle));
  return samples;
}

double measure_device_copy(size_t bytes, int repeats) {
  void *src = nullptr, *dst = nullptr;
  CUDA_CHECK(cudaMalloc(&src, bytes));
  CUDA_CHECK(cudaMalloc(&dst, bytes));
  CUDA_CHECK(cudaMemset(src, 1, bytes));
  auto copy = [&] {
    CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice));
    CUDA_CHECK(cudaDeviceSynchronize());
  };
  copy();  // warm-up
  std::vector<double> times;
  for (int rep = 0; rep < repeats; ++rep) times.push_back(time_all_ranks(copy));
  CUDA_CHECK(cudaFree(src));
  CUDA_CHECK(cudaFree(dst));
  std::sort(times.begin(), times.end());
  return 2.0 * double(bytes) / times[times.size() / 2];
}

}  // namespace ff::measure
