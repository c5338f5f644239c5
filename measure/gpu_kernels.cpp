#include "measure/gpu_kernels.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>

#include "engine/adamw.hpp"
#include "engine/cuda/kernels.hpp"
#include "engine/runtime/bf16.hpp"
#include "engine/runtime/cublas_api.hpp"
#include "engine/runtime/cublas_gemm.hpp"
#include "engine/runtime/cuda_check.hpp"
#include "engine/runtime/fatal.hpp"
#include "measure/hiding_kernels.hpp"

namespace ff::measure {

namespace {

using engine::bf16;

// Device memory of n values, set to a small bf16/fp32 pattern: timings, not
// results, are wanted, and no value grows to inf or NaN.
template <typename T>
struct Array {
  T* p = nullptr;
  explicit Array(size_t n) {
    CUDA_CHECK(cudaMalloc(&p, std::max<size_t>(n, 1) * sizeof(T)));
    CUDA_CHECK(cudaMemset(p, 0x3c, std::max<size_t>(n, 1) * sizeof(T)));
  }
  Array(const Array&) = delete;
  ~Array() { cudaFree(p); }
};

// `calls` back to back on one stream between two events, `repeats` times
// after one warm-up call: seconds per call, each timing.
std::vector<double> time_calls(const std::function<void(cudaStream_t)>& call, int calls, int repeats) {
  cudaStream_t s;
  CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaEvent_t a, b;
  CUDA_CHECK(cudaEventCreate(&a));
  CUDA_CHECK(cudaEventCreate(&b));
  call(s);
  std::vector<double> times;
  for (int r = 0; r < repeats; ++r) {
    CUDA_CHECK(cudaEventRecord(a, s));
    for (int c = 0; c < calls; ++c) call(s);
    CUDA_CHECK(cudaEventRecord(b, s));
    CUDA_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    times.push_back(ms * 1e-3 / calls);
  }
  CUDA_CHECK(cudaEventDestroy(a));
  CUDA_CHECK(cudaEventDestroy(b));
  CUDA_CHECK(cudaStreamDestroy(s));
  return times;
}

// Forward and backward at S tokens: the engine level's FLOP count (MODEL.md
// §2: 2·S²·d_h a sequence and head forward, backward 3.5 times that).
ff::GpuKernelSample flash_sample(const ff::ModelSpec& m, int micro_batch, long S, int repeats) {
  const long heads = m.heads, kv = m.kv_head_count(), dh = m.head_size(), t = micro_batch * S;
  Array<bf16> qkv(size_t(t * (heads + 2 * kv) * dh)), out(size_t(t * heads * dh)), dout(size_t(t * heads * dh)),
      dqkv(size_t(t * (heads + 2 * kv) * dh));
  Array<float> lse(size_t(micro_batch * heads * S)), delta(size_t(micro_batch * heads * S));
  auto step = [&](cudaStream_t s) {
    cuda::flash_attention_forward(qkv.p, out.p, lse.p, micro_batch, S, heads, kv, dh, s);
    cuda::flash_attention_backward(qkv.p, out.p, lse.p, dout.p, dqkv.p, delta.p, micro_batch, S, heads, kv, dh, s);
  };
  const double forward = 2.0 * double(micro_batch) * double(heads) * double(S) * double(S) * double(dh);
  return {"flash_attention", double(S), int(dh), 4.5 * forward, 0, time_calls(step, 3, repeats)};
}

}  // namespace

std::vector<ff::GpuKernelSample> time_gpu_kernels(const ff::ModelSpec& m, int micro_batch,
                                                  const std::vector<double>& seqs, int repeats) {
  std::vector<ff::GpuKernelSample> out;
  for (double S : seqs) out.push_back(flash_sample(m, micro_batch, long(S), repeats));
  // A block's memory-bound kernels at the model's sizes, bf16 as the engine
  // runs them, at the micro-batch's tokens and at a quarter of them (what a
  // kernel costs beyond its bytes shows in the difference): the residual add
  // over [t, H], GELU each way over [t, F], the four biases' add and
  // gradients, and the norm each way; AdamW over a block's weights (fp32
  // master, m, v and gradient; the bf16 weight) once.
  const size_t tokens = size_t(micro_batch) * size_t(m.seq_len), H = size_t(m.hidden), F = size_t(m.ffn);
  for (const size_t t : {tokens, std::max<size_t>(tokens / 4, 1)}) {
    {
      Array<bf16> a(t * H), b(t * H), c(t * H);
      out.push_back({"residual add", 0, 0, 0, 6.0 * double(t * H),
                     time_calls([&](cudaStream_t s) { cuda::add(a.p, b.p, c.p, t * H, s); }, 5, repeats)});
    }
    {
      Array<bf16> f(t * F), g(t * F), dg(t * F);
      out.push_back({"gelu forward", 0, 0, 0, 4.0 * double(t * F),
                     time_calls([&](cudaStream_t s) { cuda::gelu_forward(f.p, g.p, long(t * F), s); }, 5, repeats)});
      out.push_back({"gelu backward", 0, 0, 0, 6.0 * double(t * F),
                     time_calls([&](cudaStream_t s) { cuda::gelu_backward(f.p, dg.p, g.p, long(t * F), s); }, 5,
                                repeats)});
      Array<bf16> bias(F);
      out.push_back({"bias add", 0, 0, 0, 4.0 * double(t * F),
                     time_calls([&](cudaStream_t s) { cuda::add_bias(g.p, bias.p, long(t), long(F), s); }, 5,
                                repeats)});
      // The four biases' gradients (column sums over the tokens, read once),
      // at the widths of QKV, the output projection, FC1 and FC2.
      const long qkv = long(m.heads + 2 * m.kv_head_count()) * m.head_size();
      const long widths[4] = {qkv, long(H), long(F), long(H)};
      Array<float> dbias(size_t(std::max<long>(qkv, long(F))));
      out.push_back({"bias gradient", 0, 0, 0, 2.0 * double(t) * double(qkv + 2 * long(H) + long(F)),
                     time_calls([&](cudaStream_t s) {
                       for (long n : widths) cuda::bias_grad(g.p, dbias.p, long(t), n, s);
                     }, 5, repeats)});
    }
    {
      // The norm on whole rows (G_x = 1) each way: forward reads x and writes
      // y and x̂; backward reads dy and x̂ and writes dx (the statistics and
      // parameter gradients are a row's and a column's, not counted).
      Array<bf16> x(t * H), y(t * H), xhat(t * H), gamma(H), beta(H);
      Array<float> rstd(t), dgamma(H), dbeta(H);
      const bool rms = m.norm == ff::Norm::RmsNorm;
      out.push_back({"norm forward", 0, 0, 0, 6.0 * double(t * H), time_calls([&](cudaStream_t s) {
                       if (rms) cuda::rmsnorm_forward(x.p, gamma.p, y.p, xhat.p, rstd.p, long(t), long(H), s);
                       else cuda::layernorm_forward(x.p, gamma.p, beta.p, y.p, xhat.p, rstd.p, long(t), long(H), s);
                     }, 5, repeats)});
      out.push_back({"norm backward", 0, 0, 0, 6.0 * double(t * H), time_calls([&](cudaStream_t s) {
                       if (rms)
                         cuda::rmsnorm_backward(y.p, xhat.p, rstd.p, gamma.p, x.p, dgamma.p, long(t), long(H), s);
                       else cuda::layernorm_backward(y.p, xhat.p, rstd.p, gamma.p, x.p, dgamma.p, dbeta.p, long(t),
                                                     long(H), s);
                     }, 5, repeats)});
    }
  }
  {
    const size_t n = 12 * H * H;
    Array<float> master(n), g(n), mo(n), v(n);
    Array<bf16> w(n);
    const engine::AdamWStep<float> st{1, 0.9f, 0.95f, 1e-4f, 1e-8f, 0.1f, 0.05f, 0.1f};
    out.push_back({"adamw", 0, 0, 0, double(n) * (4 * 4 + 4 * 4 + 2),
                   time_calls(
                       [&](cudaStream_t s) { cuda::adamw_update<bf16>(master.p, g.p, mo.p, v.p, w.p, n, st, s); }, 3,
                       repeats)});
  }
  return out;
}

std::vector<ff::HidingSample> time_hiding(const ff::ModelSpec& m, int micro_batch, const std::vector<int>& blocks,
                                          int repeats) {
  // FC1's forward GEMM at the model's sizes: [t, H] × [H, F].
  const int M = micro_batch * int(m.seq_len), N = int(m.ffn), K = int(m.hidden);
  cublasHandle_t h;
  CUBLAS_CHECK(cuda::cublas().create(&h));
  cudaStream_t sg, sc;
  CUDA_CHECK(cudaStreamCreateWithFlags(&sg, cudaStreamNonBlocking));
  CUDA_CHECK(cudaStreamCreateWithFlags(&sc, cudaStreamNonBlocking));
  CUBLAS_CHECK(cuda::cublas().set_stream(h, sg));
  Array<bf16> a(size_t(M) * K), b(size_t(K) * N), c(size_t(M) * N);
  const size_t copy_n = size_t(64) << 20;  // 256 MiB each way: beyond the L2
  Array<float> src(copy_n), dst(copy_n);
  cudaEvent_t g0, g1, c0, c1;
  for (cudaEvent_t* e : {&g0, &g1, &c0, &c1}) CUDA_CHECK(cudaEventCreate(e));
  auto elapsed = [](cudaEvent_t x, cudaEvent_t y) {
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, x, y));
    return double(ms) * 1e-3;
  };
  auto gemms = [&](int calls) {
    CUDA_CHECK(cudaEventRecord(g0, sg));
    for (int i = 0; i < calls; ++i)
      cuda::gemm_bf16(h, false, false, M, N, K, 1.0f, a.p, K, b.p, N, 0.0f, c.p, N);
    CUDA_CHECK(cudaEventRecord(g1, sg));
  };
  int device = 0, khz = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, device));
  // The blocks beside the GEMMs: copying `rounds` times over, or held for
  // as many seconds as one copy round took times `rounds`.
  double round_s = 0;
  auto beside = [&](bool copying, int on, int rounds) {
    CUDA_CHECK(cudaEventRecord(c0, sc));
    if (copying) copy_on_blocks(src.p, dst.p, copy_n, on, rounds, sc);
    else hold_blocks(on, (long long)(round_s * rounds * 1e3 * khz), sc);
    CUDA_CHECK(cudaEventRecord(c1, sc));
  };
  gemms(3);
  CUDA_CHECK(cudaStreamSynchronize(sg));
  const double one = elapsed(g0, g1) / 3;
  const int calls = std::max(3, int(20e-3 / one));  // about 20 ms of GEMMs a timing
  std::vector<ff::HidingSample> out;
  for (bool copying : {true, false})
    for (int on : blocks) {
      beside(true, on, 1);
      CUDA_CHECK(cudaStreamSynchronize(sc));
      round_s = elapsed(c0, c1);
      // Enough rounds to outlast the GEMMs even at half their speed.
      const int rounds = std::max(1, int(std::ceil(2.0 * calls * one / round_s)));
      ff::HidingSample hs{double(M), double(N), double(K), on, copying, {}, {}, 0};
      double moved = 0, took = 0;
      for (int r = 0; r < repeats; ++r) {
        gemms(calls);
        CUDA_CHECK(cudaStreamSynchronize(sg));
        hs.alone_s.push_back(elapsed(g0, g1) / calls);
        beside(copying, on, rounds);  // first, so that its blocks hold their SMs before the GEMMs start
        gemms(calls);
        CUDA_CHECK(cudaStreamSynchronize(sg));
        CUDA_CHECK(cudaStreamSynchronize(sc));
        if (elapsed(c0, c1) < elapsed(c0, g1)) FF_FATAL("measure: the blocks beside the GEMMs ended before them");
        hs.beside_s.push_back(elapsed(g0, g1) / calls);
        moved += copying ? 2.0 * double(copy_n) * sizeof(float) * rounds : 0, took += elapsed(c0, c1);
      }
      hs.copy_bytes_per_s = moved / took;
      out.push_back(hs);
    }
  for (cudaEvent_t e : {g0, g1, c0, c1}) CUDA_CHECK(cudaEventDestroy(e));
  CUDA_CHECK(cudaStreamDestroy(sg));
  CUDA_CHECK(cudaStreamDestroy(sc));
  CUBLAS_CHECK(cuda::cublas().destroy(h));
  return out;
}

double time_launch(int repeats) {
  Array<bf16> a(1);
  return ff::median(time_calls([&](cudaStream_t s) { cuda::add(a.p, a.p, a.p, 1, s); }, 1000, repeats));
}

}  // namespace ff::measure
