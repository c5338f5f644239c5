// The GPU kernels (engine/cuda/kernels.hpp) against the cpu functions they
// are the twins of (layers.hpp, llama_layers.hpp, adamw.hpp): the same
// inputs, results within
// the dtype's rounding (the GPU sums rows in a tree, the cpu in lanes). fp32,
// fp64 and bf16, whose kernels compute in fp32 (its master type M) and round
// what they store in bf16: a value the two round from fp32 results a few
// fp32 ulps apart may land on neighbouring bf16 values. Exits 77 (skipped)
// where no GPU is usable, as measure's GPU test does.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <type_traits>
#include <utility>
#include <vector>

#include "engine/adamw.hpp"
#include "engine/cuda/kernels.hpp"
#include "engine/device.hpp"
#include "engine/device_kernels.hpp"
#include "engine/flash_attention.hpp"
#include "engine/layers.hpp"
#include "engine/llama_layers.hpp"
#include "engine/matmul.hpp"
#include "engine/runtime/bf16.hpp"
#include "engine/runtime/cublas_api.hpp"
#include "engine/runtime/cublas_gemm.hpp"
#include "engine/runtime/cublaslt_gemm.hpp"
#include "engine/runtime/cuda_check.hpp"

using ff::engine::bf16;
using ff::engine::master_t;
TYPE_TO_STRING(bf16);

namespace {

// A device copy of a host vector, read back with get(), rewritten with set().
template <typename T>
struct DeviceArray {
  T* p = nullptr;
  size_t n = 0;
  explicit DeviceArray(const std::vector<T>& h) : n(h.size()) {
    CUDA_CHECK(cudaMalloc(&p, std::max<size_t>(1, n) * sizeof(T)));
    set(h);
  }
  DeviceArray(const DeviceArray&) = delete;
  ~DeviceArray() { cudaFree(p); }
  void set(const std::vector<T>& h) {
    REQUIRE(h.size() == n);
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(p, h.data(), n * sizeof(T), cudaMemcpyHostToDevice));
  }
  std::vector<T> get() const {
    CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<T> h(n);
    CUDA_CHECK(cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
  }
};

// Rounded to T where T is bf16: the inputs are the dtype's values.
template <typename T>
std::vector<T> uniform(size_t n, double lo, double hi, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> d(lo, hi);
  std::vector<T> v(n);
  for (T& x : v) x = T(d(rng));
  return v;
}

// max |a − b| over max |b|.
template <typename T>
double rel_diff(const std::vector<T>& a, const std::vector<T>& b) {
  REQUIRE(a.size() == b.size());
  double diff = 0, scale = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    diff = std::max(diff, std::abs(double(a[i]) - double(b[i])));
    scale = std::max(scale, std::abs(double(b[i])));
  }
  return diff / std::max(scale, 1e-300);
}

// For outputs in T. bf16: 2 ulps (2⁻⁶ relative at the bottom of a binade)
// of the largest value, as rel_diff scales by it: one output rounded to the
// neighbouring bf16 from a nearly equal fp32 value, or rounded inputs one
// ulp apart carried into it. An element far below the largest may differ by
// more of its own ulps (the floor is the largest's), as when a sum cancels.
template <typename T>
double tolerance() {
  if constexpr (std::is_same_v<T, bf16>) return 0x1p-6;
  else return sizeof(T) == 4 ? 2e-5 : 1e-12;
}
// For outputs in M computed from the same T inputs on both: M's own.
template <typename T>
double master_tolerance() {
  return tolerance<master_t<T>>();
}

}  // namespace

TEST_CASE_TEMPLATE("row-major GEMMs on cuBLAS against the cpu's, every transpose, beta 0 and 1", T, float, double,
                   bf16) {
  using M = master_t<T>;
  auto cpu = ff::engine::make_cpu_device();
  cublasHandle_t h;
  CUBLAS_CHECK(ff::cuda::cublas().create(&h));
  CUBLAS_CHECK(ff::cuda::cublas().set_math_mode(h, CUBLAS_PEDANTIC_MATH));  // no TF32: the cpu's fp32
  const int m = 37, n = 29, k = 41;
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (M beta : {M(0), M(1)}) {
        const int lda = ta ? m : k, ldb = tb ? k : n;
        auto A = uniform<T>(size_t(m) * k, -1, 1, 23), B = uniform<T>(size_t(k) * n, -1, 1, 24),
             C = uniform<T>(size_t(m) * n, -1, 1, 25);
        DeviceArray<T> dA(A), dB(B), dC(C);
        ff::engine::host_gemm(*cpu, ta, tb, m, n, k, M(0.5), A.data(), lda, B.data(), ldb, beta, C.data(), n);
        ff::cuda::gemm(h, ta, tb, m, n, k, M(0.5), dA.p, lda, dB.p, ldb, beta, dC.p, n);
        INFO("ta " << ta << " tb " << tb << " beta " << double(beta));
        CHECK(rel_diff(dC.get(), C) < tolerance<T>());
        if constexpr (!std::is_same_v<T, M>) {
          // Into the fp32 accumulator (gemm_to_master): bf16 products are
          // exact in fp32, so only the order of the 41 fp32 additions
          // differs, and cuBLAS's tensor cores may round each less carefully
          // than an fp32 FMA: 1e-4 is a few dozen fp32 ulps.
          auto Cm = uniform<M>(size_t(m) * n, -1, 1, 26);
          DeviceArray<M> dCm(Cm);
          ff::engine::host_gemm(*cpu, ta, tb, m, n, k, M(0.5), A.data(), lda, B.data(), ldb, beta, Cm.data(), n);
          ff::cuda::gemm(h, ta, tb, m, n, k, M(0.5), dA.p, lda, dB.p, ldb, beta, dCm.p, n);
          CHECK(rel_diff(dCm.get(), Cm) < 1e-4);
        }
      }
  CUBLAS_CHECK(ff::cuda::cublas().destroy(h));
}

TEST_CASE_TEMPLATE("layernorm forward and backward, a hidden slice of 300 of 600 columns, 150 tokens", T, float, double,
                   bf16) {
  using M = master_t<T>;
  // hx above the block's 256 threads: the rows are strided; t over two chunks of
  // 64 rows and a partial one: dγ and dβ sum across chunks
  const long t = 150, hx = 300, H = 600;
  auto x = uniform<T>(t * hx, -2, 2, 1), gamma = uniform<T>(hx, 0.5, 1.5, 2), beta = uniform<T>(hx, -1, 1, 3);
  std::vector<M> sum(t), mean(t), sq(t), rstd(t);
  std::vector<T> y(t * hx), xhat(t * hx);
  ff::engine::layernorm_row_sums(x.data(), sum.data(), t, hx);
  ff::engine::layernorm_centred_squares(x.data(), sum.data(), mean.data(), sq.data(), t, hx, H);
  ff::engine::layernorm_normalize(x.data(), mean.data(), sq.data(), gamma.data(), beta.data(), y.data(), xhat.data(),
                                  rstd.data(), t, hx, H);
  DeviceArray<T> dx_(x), dgamma_(gamma), dbeta_(beta), dy_out(y), dxhat(xhat);
  DeviceArray<M> dsum(sum), dmean(mean), dsq(sq), drstd(rstd);
  ff::cuda::layernorm_row_sums(dx_.p, dsum.p, t, hx, nullptr);
  CHECK(rel_diff(dsum.get(), sum) < master_tolerance<T>());
  ff::cuda::layernorm_centred_squares(dx_.p, dsum.p, dmean.p, dsq.p, t, hx, H, nullptr);
  CHECK(rel_diff(dmean.get(), mean) < master_tolerance<T>());
  CHECK(rel_diff(dsq.get(), sq) < master_tolerance<T>());
  ff::cuda::layernorm_normalize(dx_.p, dmean.p, dsq.p, dgamma_.p, dbeta_.p, dy_out.p, dxhat.p, drstd.p, t, hx, H,
                                nullptr);
  CHECK(rel_diff(dy_out.get(), y) < tolerance<T>());
  CHECK(rel_diff(dxhat.get(), xhat) < tolerance<T>());
  CHECK(rel_diff(drstd.get(), rstd) < master_tolerance<T>());

  // Backward on the cpu's x̂ and rstd (in bf16 a few of the GPU's x̂ are a
  // neighbouring value), dγ and dβ accumulating onto what is there.
  dxhat.set(xhat);
  drstd.set(rstd);
  auto dy = uniform<T>(t * hx, -1, 1, 4);
  auto dg = uniform<M>(hx, -1, 1, 5), db = uniform<M>(hx, -1, 1, 6);
  std::vector<M> stat(2 * t);
  std::vector<T> dxv(t * hx);
  DeviceArray<T> ddy(dy), ddx(dxv);
  DeviceArray<M> ddg(dg), ddb(db), dstat(stat);
  ff::engine::layernorm_backward_sums(dy.data(), xhat.data(), gamma.data(), stat.data(), t, hx);
  ff::engine::layernorm_backward_apply(dy.data(), xhat.data(), rstd.data(), gamma.data(), stat.data(), dxv.data(),
                                       dg.data(), db.data(), t, hx, H);
  ff::cuda::layernorm_backward_sums(ddy.p, dxhat.p, dgamma_.p, dstat.p, t, hx, nullptr);
  CHECK(rel_diff(dstat.get(), stat) < master_tolerance<T>());
  ff::cuda::layernorm_backward_apply(ddy.p, dxhat.p, drstd.p, dgamma_.p, dstat.p, ddx.p, ddg.p, ddb.p, t, hx, H,
                                     nullptr);
  CHECK(rel_diff(ddx.get(), dxv) < tolerance<T>());
  CHECK(rel_diff(ddg.get(), dg) < master_tolerance<T>());
  CHECK(rel_diff(ddb.get(), db) < master_tolerance<T>());
}

// The linear layers' forward with the bias, and GELU, in cuBLASLt's
// epilogue against the cpu's twin (CpuKernels: the product rounded to T, the
// bias added and rounded, GELU on that). The epilogue adds the bias to the
// fp32 accumulator and rounds once, GELU's input and output each once: in
// bf16 a value a rounding from the cpu's, within tolerance<bf16>(); fp32
// sums the same products in another order, as cuBLAS does. Shapes: m and k
// odd (leading dimensions off 16 bytes: run where cuBLASLt has a kernel for
// them) and multiples of 8; n a multiple of 8 and not (GELU's input rows
// must be, AUX_LD's rule: declined). The engine runs ta = false, tb either
// (the tied head); ta = true besides. GELU in bf16, the dtype the cuda
// device fuses it in. fp64 has no epilogue: declined, the cuda device's
// separate kernels run it.
TEST_CASE_TEMPLATE("GEMMs with the bias and GELU in cuBLASLt's epilogue against the cpu's, every transpose", T, float,
                   double, bf16) {
  using M = master_t<T>;
  auto cpu = ff::engine::make_cpu_device();
  ff::engine::CpuKernels<T> twin(*cpu);
  ff::cuda::EpilogueGemm lt(nullptr);
  constexpr bool gelu = std::is_same_v<T, bf16>;
  int ran = 0, aligned_ran = 0;
  for (auto [m, k] : {std::pair{37, 41}, {48, 64}})
    for (int n : {64, 29})
      for (bool ta : {false, true})
        for (bool tb : {false, true}) {
          const int lda = ta ? m : k, ldb = tb ? k : n;
          const size_t mn = size_t(m) * n;
          auto A = uniform<T>(size_t(m) * k, -1, 1, 31), B = uniform<T>(size_t(k) * n, -1, 1, 32),
               bias = uniform<T>(size_t(n), -2, 2, 33);
          std::vector<T> C(mn), pre(mn), G(mn);
          DeviceArray<T> dA(A), dB(B), dbias(bias), dC(C), dpre(pre), dG(G);
          INFO("m " << m << " n " << n << " k " << k << " ta " << ta << " tb " << tb);
          twin.gemm_bias(ta, tb, m, n, k, M(0.5), A.data(), lda, B.data(), ldb, bias.data(), C.data());
          const bool with_bias = lt.run(ta, tb, m, n, k, M(0.5), dA.p, lda, dB.p, ldb, dbias.p,
                                        static_cast<T*>(nullptr), dC.p);
          if constexpr (std::is_same_v<T, double>) CHECK_FALSE(with_bias);
          if (with_bias) CHECK(rel_diff(dC.get(), C) < tolerance<T>());
          bool with_gelu = false;
          if constexpr (gelu) {
            twin.gemm_bias_gelu(ta, tb, m, n, k, M(0.5), A.data(), lda, B.data(), ldb, bias.data(), pre.data(),
                                G.data());
            with_gelu = lt.run(ta, tb, m, n, k, M(0.5), dA.p, lda, dB.p, ldb, dbias.p, dpre.p, dG.p);
            if (n % 8) CHECK_FALSE(with_gelu);
            if (with_gelu) {
              CHECK(rel_diff(dpre.get(), pre) < tolerance<T>());
              CHECK(rel_diff(dG.get(), G) < tolerance<T>());
            }
          }
          ran += with_bias + with_gelu;
          if (m % 8 == 0 && n % 8 == 0) aligned_ran += with_bias + with_gelu;
        }
  MESSAGE("cuBLASLt ran " << ran << " epilogue GEMMs, " << aligned_ran << " of them on aligned shapes");
  // bf16 is what the engine trains in: on aligned shapes every case fused.
  if constexpr (gelu) CHECK(aligned_ran == 8);
}

// Which GELU the epilogue computes: its input exactly the bias (A zero), so
// that only the function differs. The tanh form (GPT-2's, the engine's) and
// the erf form differ by up to 4.7e-4 (at x = -2.7); reported for fp32, whose
// GELU the cuda device keeps in its own kernel (cuBLASLt does not document
// its GELU's accuracy), and checked for bf16, which fuses it: within its
// tolerance of the cpu's tanh form.
TEST_CASE_TEMPLATE("cuBLASLt's GELU epilogue is GELU's tanh form", T, float, bf16) {
  using M = master_t<T>;
  const int m = 16, n = 64, k = 16;
  std::vector<T> A(size_t(m) * k, T(0)), B = uniform<T>(size_t(k) * n, -1, 1, 41), bias(n);
  for (int j = 0; j < n; ++j) bias[size_t(j)] = T(j / 8.0 - 4);  // [-4, 3.875], exact in bf16
  DeviceArray<T> dA(A), dB(B), dbias(bias), dpre(std::vector<T>(size_t(m) * n)), dG(std::vector<T>(size_t(m) * n));
  ff::cuda::EpilogueGemm lt(nullptr);
  if (!lt.run(false, false, m, n, k, M(1), dA.p, k, dB.p, n, dbias.p, dpre.p, dG.p)) {
    MESSAGE("no GELU epilogue for this dtype");
    return;
  }
  const std::vector<T> g = dG.get();
  std::vector<T> want(n);
  ff::engine::gelu_forward(bias.data(), want.data(), n);
  double to_tanh = 0, to_erf = 0;
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      const double x = double(bias[size_t(j)]), got = double(g[size_t(i) * n + j]);
      to_tanh = std::max(to_tanh, std::abs(got - double(want[size_t(j)])));
      to_erf = std::max(to_erf, std::abs(got - 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)))));
    }
  MESSAGE("max |GELU epilogue - tanh form| " << to_tanh << ", - erf form " << to_erf);
  if constexpr (std::is_same_v<T, bf16>) CHECK(to_tanh < tolerance<T>() * 3.875);  // of the largest, as rel_diff
}

TEST_CASE_TEMPLATE("gelu forward and backward", T, float, double, bf16) {
  const long n = 1000;
  auto x = uniform<T>(n, -6, 6, 7), dy = uniform<T>(n, -1, 1, 8);
  std::vector<T> y(n), dx(n);
  ff::engine::gelu_forward(x.data(), y.data(), n);
  ff::engine::gelu_backward(x.data(), dy.data(), dx.data(), n);
  DeviceArray<T> dxs(x), ddy(dy), dys(y), ddx(dx);
  ff::cuda::gelu_forward(dxs.p, dys.p, n, nullptr);
  ff::cuda::gelu_backward(dxs.p, ddy.p, ddx.p, n, nullptr);
  CHECK(rel_diff(dys.get(), y) < tolerance<T>());
  CHECK(rel_diff(ddx.get(), dx) < tolerance<T>());
}

// The element-wise kernels take 16 bytes a thread where every array is
// aligned (scalar.cuh), one value at a time otherwise and in the tail: each
// against the cpu on lengths around a chunk and a long one, from aligned
// arrays and from ones a value past alignment, outputs poisoned with 9.
TEST_CASE_TEMPLATE("element-wise kernels in 16-byte chunks: tails and arrays off alignment", T, float, double, bf16) {
  using M = master_t<T>;
  for (long n : {1L, 7L, 8L, 9L, 1003L})
    for (long off : {0L, 1L}) {
      INFO(n << " values, " << off << " past alignment");
      const size_t len = size_t(n + off);
      auto a = uniform<T>(len, -6, 6, 41), b = uniform<T>(len, -1, 1, 42);
      auto am = uniform<M>(len, -1, 1, 43);
      DeviceArray<T> da(a), db(b), dout{std::vector<T>(len, T(9))};
      DeviceArray<M> dm(am);
      std::vector<T> want(a);
      ff::engine::gelu_forward(a.data() + off, want.data() + off, n);
      ff::cuda::gelu_forward(da.p + off, dout.p + off, n, nullptr);
      auto got = dout.get();
      std::copy(a.begin(), a.begin() + off, got.begin());  // before the array: not written
      CHECK(rel_diff(got, want) < tolerance<T>());
      ff::engine::gelu_backward(a.data() + off, b.data() + off, want.data() + off, n);
      ff::cuda::gelu_backward(da.p + off, db.p + off, dout.p + off, n, nullptr);
      got = dout.get();
      std::copy(want.begin(), want.begin() + off, got.begin());
      CHECK(rel_diff(got, want) < tolerance<T>());
      for (long i = off; i < long(len); ++i) want[size_t(i)] = T(M(a[size_t(i)]) + M(b[size_t(i)]));
      ff::cuda::add(da.p + off, db.p + off, dout.p + off, size_t(n), nullptr);
      got = dout.get();
      std::copy(want.begin(), want.begin() + off, got.begin());
      CHECK(rel_diff(got, want) == 0);
      std::vector<M> acc(am);
      for (long i = off; i < long(len); ++i) acc[size_t(i)] += M(a[size_t(i)]);
      ff::cuda::accumulate(dm.p + off, da.p + off, size_t(n), nullptr);
      CHECK(rel_diff(dm.get(), acc) == 0);
      for (long i = off; i < long(len); ++i) want[size_t(i)] = T(am[size_t(i)]);
      ff::cuda::narrow(DeviceArray<M>(am).p + off, dout.p + off, size_t(n), nullptr);
      got = dout.get();
      std::copy(want.begin(), want.begin() + off, got.begin());
      CHECK(rel_diff(got, want) == 0);
      std::vector<M> wide(am);
      for (long i = off; i < long(len); ++i) wide[size_t(i)] = M(a[size_t(i)]);
      dm.set(am);
      ff::cuda::widen(da.p + off, dm.p + off, size_t(n), nullptr);
      CHECK(rel_diff(dm.get(), wide) == 0);
    }
  // A bias over rows of 8 (whole chunks), 16 and 7 (chunks across rows) columns.
  for (long cols : {8L, 16L, 7L}) {
    const long rows = 13;
    INFO(rows << " rows of " << cols);
    auto out = uniform<T>(size_t(rows * cols), -1, 1, 44), bias = uniform<T>(size_t(cols), -1, 1, 45);
    std::vector<T> want(out);
    for (long i = 0; i < rows; ++i)
      for (long j = 0; j < cols; ++j) want[size_t(i * cols + j)] = T(M(out[size_t(i * cols + j)]) + M(bias[size_t(j)]));
    DeviceArray<T> dout(out), dbias(bias);
    ff::cuda::add_bias(dout.p, dbias.p, rows, cols, nullptr);
    CHECK(rel_diff(dout.get(), want) == 0);
  }
  // The bias gradient over 150 rows (in chunks of 8 rows here, the last
  // partial: so few columns leave the GPU's blocks to the rows): 16 bytes
  // a row where the columns are whole chunks and the array aligned; the
  // same array a value past alignment takes one column a thread, and must
  // add the same values in the same order.
  for (long cols : {8L, 16L, 7L}) {
    const long rows = 150;
    INFO("bias gradient, " << rows << " rows of " << cols);
    auto g = uniform<T>(size_t(rows * cols + 1), -1, 1, 46);
    auto db0 = uniform<M>(size_t(cols), -1, 1, 47);
    std::vector<M> want(db0);
    for (long i = 0; i < rows; ++i)
      for (long j = 0; j < cols; ++j) want[size_t(j)] += M(g[size_t(i * cols + j)]);
    std::vector<T> shifted(g.size());
    std::copy(g.begin(), g.end() - 1, shifted.begin() + 1);
    DeviceArray<T> dg(g), dshifted(shifted);
    DeviceArray<M> a(db0), b(db0);
    ff::cuda::bias_grad(dg.p, a.p, rows, cols, nullptr);
    ff::cuda::bias_grad(dshifted.p + 1, b.p, rows, cols, nullptr);
    CHECK(rel_diff(a.get(), want) < master_tolerance<T>());
    CHECK(a.get() == b.get());
  }
}

TEST_CASE_TEMPLATE("rmsnorm forward and backward, a hidden slice of 300 of 600 columns, 150 tokens", T, float, double,
                   bf16) {
  using M = master_t<T>;
  // As LayerNorm's: rows strided over the block, dγ summed across chunks.
  const long t = 150, hx = 300, H = 600;
  auto x = uniform<T>(t * hx, -2, 2, 31), gamma = uniform<T>(hx, 0.5, 1.5, 32);
  std::vector<M> sq(t), rstd(t);
  std::vector<T> y(t * hx), xhat(t * hx);
  ff::engine::rmsnorm_row_squares(x.data(), sq.data(), t, hx);
  ff::engine::rmsnorm_normalize(x.data(), sq.data(), gamma.data(), y.data(), xhat.data(), rstd.data(), t, hx, H);
  // Outputs start as 9s: a kernel that writes nothing fails.
  DeviceArray<T> dx_(x), dgamma_(gamma), dy_out(std::vector<T>(y.size(), T(9))), dxhat(std::vector<T>(xhat.size(), T(9)));
  DeviceArray<M> dsq(std::vector<M>(sq.size(), M(9))), drstd(std::vector<M>(rstd.size(), M(9)));
  ff::cuda::rmsnorm_row_squares(dx_.p, dsq.p, t, hx, nullptr);
  CHECK(rel_diff(dsq.get(), sq) < master_tolerance<T>());
  dsq.set(sq);  // normalize from the cpu's sums, as the reduction over X would hand them
  ff::cuda::rmsnorm_normalize(dx_.p, dsq.p, dgamma_.p, dy_out.p, dxhat.p, drstd.p, t, hx, H, nullptr);
  CHECK(rel_diff(dy_out.get(), y) < tolerance<T>());
  CHECK(rel_diff(dxhat.get(), xhat) < tolerance<T>());
  CHECK(rel_diff(drstd.get(), rstd) < master_tolerance<T>());

  // Backward on the cpu's x̂ and rstd, dγ accumulating onto what is there.
  dxhat.set(xhat);
  drstd.set(rstd);
  auto dy = uniform<T>(t * hx, -1, 1, 33);
  auto dg = uniform<M>(hx, -1, 1, 34);
  std::vector<M> stat(t);
  std::vector<T> dxv(t * hx);
  DeviceArray<T> ddy(dy), ddx(dxv);
  DeviceArray<M> ddg(dg), dstat(stat);
  ff::engine::rmsnorm_backward_sums(dy.data(), xhat.data(), gamma.data(), stat.data(), t, hx);
  ff::engine::rmsnorm_backward_apply(dy.data(), xhat.data(), rstd.data(), gamma.data(), stat.data(), dxv.data(),
                                     dg.data(), t, hx, H);
  ff::cuda::rmsnorm_backward_sums(ddy.p, dxhat.p, dgamma_.p, dstat.p, t, hx, nullptr);
  CHECK(rel_diff(dstat.get(), stat) < master_tolerance<T>());
  dstat.set(stat);
  ff::cuda::rmsnorm_backward_apply(ddy.p, dxhat.p, drstd.p, dgamma_.p, dstat.p, ddx.p, ddg.p, t, hx, H, nullptr);
  CHECK(rel_diff(ddx.get(), dxv) < tolerance<T>());
  CHECK(rel_diff(ddg.get(), dg) < master_tolerance<T>());
}

// The fused norms on whole rows against the cpu's: rows of 1 and 7 columns
// (one value a load), 300 (16-byte vectors in fp32 and fp64, single values
// in bf16) and 2048 (every dtype's vectors, one a thread in bf16); 1100
// tokens put three rows in each of the backward's chunks.
template <typename T, bool Rms>
void check_fused_norm(long t, long H) {
  using M = master_t<T>;
  INFO("t = " << t << ", H = " << H);
  auto x = uniform<T>(t * H, -2, 2, 41), gamma = uniform<T>(H, 0.5, 1.5, 42), beta = uniform<T>(H, -1, 1, 43);
  std::vector<M> rstd(t);
  std::vector<T> y(t * H), xhat(t * H);
  if (Rms) ff::engine::rmsnorm_forward(x.data(), gamma.data(), y.data(), xhat.data(), rstd.data(), t, H);
  else ff::engine::layernorm_forward(x.data(), gamma.data(), beta.data(), y.data(), xhat.data(), rstd.data(), t, H);
  // Outputs poisoned with 9: every element must be written.
  DeviceArray<T> dx_(x), dgamma_(gamma), dbeta_(beta), dy_out(std::vector<T>(y.size(), T(9))),
      dxhat(std::vector<T>(xhat.size(), T(9)));
  DeviceArray<M> drstd(std::vector<M>(rstd.size(), M(9)));
  const auto forward = [&] {
    if (Rms) ff::cuda::rmsnorm_forward(dx_.p, dgamma_.p, dy_out.p, dxhat.p, drstd.p, t, H, nullptr);
    else ff::cuda::layernorm_forward(dx_.p, dgamma_.p, dbeta_.p, dy_out.p, dxhat.p, drstd.p, t, H, nullptr);
  };
  forward();
  const std::vector<T> y_gpu = dy_out.get(), xhat_gpu = dxhat.get();
  const std::vector<M> rstd_gpu = drstd.get();
  CHECK(rel_diff(y_gpu, y) < tolerance<T>());
  CHECK(rel_diff(xhat_gpu, xhat) < tolerance<T>());
  CHECK(rel_diff(rstd_gpu, rstd) < master_tolerance<T>());
  forward();  // a rerun is bitwise the same
  CHECK(std::memcmp(dy_out.get().data(), y_gpu.data(), y.size() * sizeof(T)) == 0);
  CHECK(std::memcmp(dxhat.get().data(), xhat_gpu.data(), y.size() * sizeof(T)) == 0);

  // Backward on the cpu's x̂ and rstd, dγ and dβ accumulating onto nonzero values.
  dxhat.set(xhat);
  drstd.set(rstd);
  auto dy = uniform<T>(t * H, -1, 1, 44);
  const auto dg0 = uniform<M>(H, -1, 1, 45), db0 = uniform<M>(H, -1, 1, 46);
  std::vector<M> dg = dg0, db = db0;
  std::vector<T> dxv(t * H);
  if (Rms) ff::engine::rmsnorm_backward(dy.data(), xhat.data(), rstd.data(), gamma.data(), dxv.data(), dg.data(), t, H);
  else
    ff::engine::layernorm_backward(dy.data(), xhat.data(), rstd.data(), gamma.data(), dxv.data(), dg.data(), db.data(),
                                   t, H);
  DeviceArray<T> ddy(dy), ddx(std::vector<T>(dxv.size(), T(9)));
  DeviceArray<M> ddg(dg0), ddb(db0);
  const auto backward = [&] {
    if (Rms) ff::cuda::rmsnorm_backward(ddy.p, dxhat.p, drstd.p, dgamma_.p, ddx.p, ddg.p, t, H, nullptr);
    else ff::cuda::layernorm_backward(ddy.p, dxhat.p, drstd.p, dgamma_.p, ddx.p, ddg.p, ddb.p, t, H, nullptr);
  };
  backward();
  const std::vector<T> dx_gpu = ddx.get();
  const std::vector<M> dg_gpu = ddg.get(), db_gpu = ddb.get();
  CHECK(rel_diff(dx_gpu, dxv) < tolerance<T>());
  CHECK(rel_diff(dg_gpu, dg) < master_tolerance<T>());
  if (!Rms) CHECK(rel_diff(db_gpu, db) < master_tolerance<T>());
  else CHECK(db_gpu == db0);
  ddg.set(dg0);
  ddb.set(db0);
  backward();
  CHECK(std::memcmp(ddx.get().data(), dx_gpu.data(), dxv.size() * sizeof(T)) == 0);
  CHECK(ddg.get() == dg_gpu);
  CHECK(ddb.get() == db_gpu);
}

// Not 1 or 2 columns: such a row normalises to x̂ = ±1 (or 0), where dx is
// exactly 0 and both devices return their rounding noise instead.
TEST_CASE_TEMPLATE("layernorm and rmsnorm fused on whole rows: 3, 7, 300, 2048 columns; 1, 5, 130 tokens", T, float,
                   double, bf16) {
  for (long H : {3L, 7L, 300L, 2048L})
    for (long t : {1L, 5L, 130L}) {
      check_fused_norm<T, false>(t, H);
      check_fused_norm<T, true>(t, H);
    }
  check_fused_norm<T, false>(1100, 300);
  check_fused_norm<T, true>(1100, 2048);
}

TEST_CASE_TEMPLATE("swiglu forward and backward on a Y block of 300 columns", T, float, double, bf16) {
  const long t = 37, fy = 300;
  auto f = uniform<T>(t * 2 * fy, -6, 6, 35), dg = uniform<T>(t * fy, -1, 1, 36);
  std::vector<T> g(t * fy), df(t * 2 * fy);
  ff::engine::swiglu_forward(f.data(), g.data(), t, fy);
  ff::engine::swiglu_backward(f.data(), dg.data(), df.data(), t, fy);
  // Outputs poisoned with 9: every element must be written.
  DeviceArray<T> dfs(f), ddg(dg), dgs{std::vector<T>(g.size(), T(9))}, ddf{std::vector<T>(df.size(), T(9))};
  ff::cuda::swiglu_forward(dfs.p, dgs.p, t, fy, nullptr);
  ff::cuda::swiglu_backward(dfs.p, ddg.p, ddf.p, t, fy, nullptr);
  CHECK(rel_diff(dgs.get(), g) < tolerance<T>());
  CHECK(rel_diff(ddf.get(), df) < tolerance<T>());
}

TEST_CASE_TEMPLATE("rope on the Q and K heads of 4 query and 2 KV heads, two sequences; its inverse undoes it", T,
                   float, double, bf16) {
  const long seqs = 2, S = 100, t = seqs * S, heads = 4, kv = 2, dh = 32;
  const auto qkv = uniform<T>(t * (heads + 2 * kv) * dh, -1, 1, 37);
  auto rotated = qkv;
  ff::engine::rope_rotate(rotated.data(), t, S, heads, kv, dh, false);
  DeviceArray<T> d(qkv);
  ff::cuda::rope_rotate(d.p, t, S, heads, kv, dh, false, ff::engine::kRopeTheta, nullptr);
  CHECK(rel_diff(d.get(), rotated) < tolerance<T>());  // the V heads untouched
  d.set(rotated);
  auto back = rotated;
  ff::engine::rope_rotate(back.data(), t, S, heads, kv, dh, true);
  ff::cuda::rope_rotate(d.p, t, S, heads, kv, dh, true, ff::engine::kRopeTheta, nullptr);
  CHECK(rel_diff(d.get(), back) < tolerance<T>());
  // bf16: rounded after each turn, a few ulps of the largest value.
  CHECK(rel_diff(d.get(), qkv) < tolerance<T>());
}

TEST_CASE_TEMPLATE("causal attention forward and backward: 19 and 300 tokens (rows above a block's threads), "
                   "multi-head and grouped-query",
                   T, float, double, bf16) {
  using M = master_t<T>;
  cublasHandle_t h;
  CUBLAS_CHECK(ff::cuda::cublas().create(&h));
  CUBLAS_CHECK(ff::cuda::cublas().set_math_mode(h, CUBLAS_PEDANTIC_MATH));  // no TF32: the cpu's fp32
  struct Shape {
    long seqs, S, heads, kv, dh;
  };
  // Groups of 2 and 3 query heads: dK and dV summed over a group's heads.
  for (const Shape& sh : {Shape{2, 19, 3, 3, 8}, Shape{2, 300, 2, 2, 16}, Shape{2, 19, 4, 2, 8},
                          Shape{3, 37, 6, 2, 16}}) {
    const long seqs = sh.seqs, S = sh.S, heads = sh.heads, kv = sh.kv, dh = sh.dh, hy = heads * dh;
    INFO(seqs << " sequences of " << S << " tokens, " << heads << " heads over " << kv << " KV heads of " << dh);
    auto qkv = uniform<T>(seqs * S * (heads + 2 * kv) * dh, -1, 1, 15), dout = uniform<T>(seqs * S * hy, -1, 1, 16);
    std::vector<T> out(seqs * S * hy), probs(seqs * heads * S * S), dqkv(qkv.size());
    auto cpu = ff::engine::make_cpu_device();
    ff::engine::attention_forward(*cpu, qkv.data(), out.data(), probs.data(), seqs, S, heads, kv, dh);
    ff::engine::attention_backward(*cpu, qkv.data(), probs.data(), dout.data(), dqkv.data(), seqs, S, heads, kv, dh);
    // Outputs and workspaces poisoned with 9: every element must be written.
    const std::vector<T> nines(probs.size(), T(9)), nines_out(out.size(), T(9)), nines_qkv(qkv.size(), T(9));
    DeviceArray<T> dq(qkv), ddo(dout), dout_(nines_out), dprobs(nines), ddqkv(nines_qkv), dscratch(nines);
    DeviceArray<M> dscores{std::vector<M>(probs.size(), M(9))};
    // As CudaKernels calls them: in place where T = M (the scores in probs
    // forward, dS over dP backward), else an M workspace and a T one.
    M* scores_forward = dscores.p;
    M* scores_backward = dscores.p;
    if constexpr (std::is_same_v<T, M>) scores_forward = dprobs.p, scores_backward = dscratch.p;
    ff::cuda::attention_forward(h, dq.p, dout_.p, dprobs.p, scores_forward, seqs, S, heads, kv, dh, nullptr);
    CHECK(rel_diff(dprobs.get(), probs) < tolerance<T>());  // the masked upper triangle zeroed
    CHECK(rel_diff(dout_.get(), out) < tolerance<T>());
    dprobs.set(probs);  // backward on the cpu's probabilities (bf16: a few rounded the other way)
    ff::cuda::attention_backward(h, dq.p, dprobs.p, ddo.p, ddqkv.p, scores_backward, dscratch.p, seqs, S, heads, kv,
                                 dh, nullptr);
    CHECK(rel_diff(ddqkv.get(), dqkv) < tolerance<T>());
  }
  CUBLAS_CHECK(ff::cuda::cublas().destroy(h));
}

namespace {

struct FlashShape {
  long seqs, S, heads, kv, dh;
};

// δ_i = Σ_d dO·O per (sequence, head, row) in M, as both backward passes
// start with.
template <typename T>
std::vector<master_t<T>> flash_delta(const std::vector<T>& out, const std::vector<T>& dout, const FlashShape& sh) {
  using M = master_t<T>;
  std::vector<M> delta(size_t(sh.seqs * sh.heads * sh.S));
  for (long q = 0; q < sh.seqs; ++q)
    for (long h = 0; h < sh.heads; ++h)
      for (long i = 0; i < sh.S; ++i) {
        M acc = 0;
        for (long d = 0; d < sh.dh; ++d) {
          const size_t at = size_t(((q * sh.S + i) * sh.heads + h) * sh.dh + d);
          acc += M(out[at]) * M(dout[at]);
        }
        delta[size_t((q * sh.heads + h) * sh.S + i)] = acc;
      }
  return delta;
}

}  // namespace

// dh 64 and 128 take bf16's tensor-core kernels, the others (and every fp32
// and fp64 shape) the SIMT ones; S of 100 and 300 end in a partial tile.
// Both sides round P and dS to T at the same points from M values computed
// in a different order (mma or a thread's loop against the cpu's lanes), so
// a bf16 value lands on the neighbouring bf16 now and then, moving an output
// by a fraction of an ulp of its own: the usual tolerances hold.
// Backward runs on the cpu's out and lse, as the unfused test's on its
// probabilities, so it checks backward alone.
TEST_CASE_TEMPLATE("flash attention forward and backward against the cpu's blocked twin: tails of tiles, GQA groups "
                   "of 2 and 3, the tensor-core and SIMT head sizes",
                   T, float, double, bf16) {
  using M = master_t<T>;
  auto cpu = ff::engine::make_cpu_device();
  for (const FlashShape& sh : {FlashShape{2, 100, 4, 2, 64}, FlashShape{2, 300, 6, 2, 128},
                               FlashShape{2, 128, 2, 2, 128}, FlashShape{2, 300, 3, 3, 64},
                               FlashShape{2, 100, 6, 2, 16}, FlashShape{2, 300, 4, 2, 8},
                               FlashShape{2, 128, 3, 1, 40}, FlashShape{1, 1, 2, 1, 64}}) {
    const long seqs = sh.seqs, S = sh.S, heads = sh.heads, kv = sh.kv, dh = sh.dh, hy = heads * dh;
    INFO(seqs << " sequences of " << S << " tokens, " << heads << " heads over " << kv << " KV heads of " << dh);
    const auto qkv = uniform<T>(seqs * S * (heads + 2 * kv) * dh, -1, 1, 41);
    const auto dout = uniform<T>(seqs * S * hy, -1, 1, 42);
    std::vector<T> out(seqs * S * hy), dqkv(qkv.size());
    std::vector<M> lse(seqs * heads * S);
    ff::engine::flash_attention_forward(*cpu, qkv.data(), out.data(), lse.data(), seqs, S, heads, kv, dh);
    ff::engine::flash_attention_backward(*cpu, qkv.data(), out.data(), lse.data(), dout.data(), dqkv.data(), seqs, S,
                                         heads, kv, dh);
    // Outputs and the workspace poisoned with 9: every element must be written.
    DeviceArray<T> dq(qkv), ddo(dout), dout_{std::vector<T>(out.size(), T(9))},
        ddqkv{std::vector<T>(qkv.size(), T(9))};
    DeviceArray<M> dlse{std::vector<M>(lse.size(), M(9))}, ddelta{std::vector<M>(lse.size(), M(9))};
    ff::cuda::flash_attention_forward(dq.p, dout_.p, dlse.p, seqs, S, heads, kv, dh, nullptr);
    CHECK(rel_diff(dout_.get(), out) < tolerance<T>());
    CHECK(rel_diff(dlse.get(), lse) < master_tolerance<T>());
    dout_.set(out);
    dlse.set(lse);
    ff::cuda::flash_attention_backward(dq.p, dout_.p, dlse.p, ddo.p, ddqkv.p, ddelta.p, seqs, S, heads, kv, dh,
                                       nullptr);
    CHECK(rel_diff(ddelta.get(), flash_delta(out, dout, sh)) < master_tolerance<T>());
    CHECK(rel_diff(ddqkv.get(), dqkv) < tolerance<T>());
    // No atomics: a rerun is bitwise the same.
    const auto first = ddqkv.get();
    ddqkv.set(std::vector<T>(qkv.size(), T(9)));
    ff::cuda::flash_attention_backward(dq.p, dout_.p, dlse.p, ddo.p, ddqkv.p, ddelta.p, seqs, S, heads, kv, dh,
                                       nullptr);
    const auto second = ddqkv.get();
    CHECK(std::equal(first.begin(), first.end(), second.begin(),
                     [](T a, T b) { return double(a) == double(b); }));
  }
}

// An independent reference: the unfused attention's, which keeps the S×S
// probabilities and normalises before P·V. Where T = M no rounding differs,
// so the two agree to M's rounding of the reordered sums.
TEST_CASE_TEMPLATE("flash attention on the GPU equals the cpu's unfused attention, forward and backward", T, float,
                   double) {
  auto cpu = ff::engine::make_cpu_device();
  for (const FlashShape& sh : {FlashShape{2, 300, 4, 2, 64}, FlashShape{2, 100, 6, 2, 16}}) {
    const long seqs = sh.seqs, S = sh.S, heads = sh.heads, kv = sh.kv, dh = sh.dh, hy = heads * dh;
    INFO(seqs << " sequences of " << S << " tokens, " << heads << " heads over " << kv << " KV heads of " << dh);
    const auto qkv = uniform<T>(seqs * S * (heads + 2 * kv) * dh, -1, 1, 43);
    const auto dout = uniform<T>(seqs * S * hy, -1, 1, 44);
    std::vector<T> out(seqs * S * hy), probs(seqs * heads * S * S), dqkv(qkv.size());
    ff::engine::attention_forward(*cpu, qkv.data(), out.data(), probs.data(), seqs, S, heads, kv, dh);
    ff::engine::attention_backward(*cpu, qkv.data(), probs.data(), dout.data(), dqkv.data(), seqs, S, heads, kv, dh);
    DeviceArray<T> dq(qkv), ddo(dout), dout_{std::vector<T>(out.size(), T(9))},
        ddqkv{std::vector<T>(qkv.size(), T(9))}, dlse{std::vector<T>(seqs * heads * S, T(9))},
        ddelta{std::vector<T>(seqs * heads * S, T(9))};
    ff::cuda::flash_attention_forward(dq.p, dout_.p, dlse.p, seqs, S, heads, kv, dh, nullptr);
    CHECK(rel_diff(dout_.get(), out) < tolerance<T>());
    ff::cuda::flash_attention_backward(dq.p, dout_.p, dlse.p, ddo.p, ddqkv.p, ddelta.p, seqs, S, heads, kv, dh,
                                       nullptr);
    CHECK(rel_diff(ddqkv.get(), dqkv) < tolerance<T>());
  }
}

TEST_CASE_TEMPLATE("embedding lookup, positions and scatter-add on the second Y block", T, float, double, bf16) {
  using M = master_t<T>;
  const long S = 7, seqs = 3, t = seqs * S, hx = 300, vy = 16, v0 = 16, ldE = hx;
  std::vector<int> tokens(seqs * (S + 1));
  std::mt19937 rng(17);
  for (int& x : tokens) x = int(rng() % 40);  // rows of both blocks and beyond: repeats too
  auto E = uniform<T>(vy * ldE, -1, 1, 18), pos = uniform<T>(S * hx, -1, 1, 19), dh0 = uniform<T>(t * hx, -1, 1, 20);
  auto dE = uniform<M>(vy * ldE, -1, 1, 21), dpos = uniform<M>(S * hx, -1, 1, 22);  // accumulated onto
  std::vector<T> h0(t * hx);
  DeviceArray<int> dtok(tokens);
  DeviceArray<T> dE_(E), dpos_(pos), dh(h0), ddh0(dh0);
  DeviceArray<M> ddE(dE), ddpos(dpos);
  ff::engine::embedding_lookup(tokens.data(), E.data(), ldE, h0.data(), t, S, hx, vy, v0);
  ff::cuda::embedding_lookup(dtok.p, dE_.p, ldE, dh.p, t, S, hx, vy, v0, nullptr);
  CHECK(rel_diff(dh.get(), h0) < tolerance<T>());
  ff::engine::add_positions(h0.data(), pos.data(), t, S, hx);
  ff::cuda::add_positions(dh.p, dpos_.p, t, S, hx, nullptr);
  CHECK(rel_diff(dh.get(), h0) < tolerance<T>());
  ff::cuda::EmbeddingRows rows;
  rows.build(tokens.data(), t, S, vy, v0);
  DeviceArray<int> dcsr(rows.csr);
  ff::engine::embedding_scatter_add(tokens.data(), dh0.data(), dE.data(), ldE, dpos.data(), t, S, hx, vy, v0);
  ff::cuda::embedding_scatter_add(dcsr.p, rows.rows, ddh0.p, ddE.p, ldE, ddpos.p, t, S, hx, nullptr);
  CHECK(rel_diff(ddE.get(), dE) == 0);  // the same additions in the same order
  CHECK(rel_diff(ddpos.get(), dpos) == 0);
  // No position table (rotary positions): dE alone.
  ff::engine::embedding_scatter_add(tokens.data(), dh0.data(), dE.data(), ldE, static_cast<M*>(nullptr), t, S, hx, vy,
                                    v0);
  ff::cuda::embedding_scatter_add(dcsr.p, rows.rows, ddh0.p, ddE.p, ldE, static_cast<M*>(nullptr), t, S, hx, nullptr);
  CHECK(rel_diff(ddE.get(), dE) == 0);
}

// A micro-batch's worth: rows hit hundreds of times (longer than the loads
// run ahead, and not a multiple of them), rows hit once, tokens of other
// blocks, a row stride wider than the block's columns, and a second
// micro-batch grouped into the same EmbeddingRows (its scratch zero again).
TEST_CASE_TEMPLATE("embedding scatter-add of 4096 tokens on a Y block of 1000 rows, bit for bit the cpu's", T, float,
                   double, bf16) {
  using M = master_t<T>;
  const long S = 1024, seqs = 4, t = seqs * S, hx = 2048, vy = 1000, v0 = 3000, ldE = hx + 64;
  ff::cuda::EmbeddingRows rows;
  auto dE = uniform<M>(vy * ldE, -1, 1, 31), dpos = uniform<M>(S * hx, -1, 1, 32);
  DeviceArray<M> ddE(dE), ddpos(dpos);
  for (unsigned batch = 0; batch < 2; ++batch) {
    INFO("micro-batch " << batch);
    std::vector<int> tokens(seqs * (S + 1));
    std::mt19937 rng(33 + batch);
    for (int& x : tokens) {
      const unsigned k = rng() % 8;
      if (k < 3) x = int(v0 + rng() % 4);  // a few rows most tokens hit
      else if (k < 6) x = int(v0 + rng() % vy);
      else x = int(rng() % 8000);  // mostly other blocks'
    }
    const auto dh0 = uniform<T>(t * hx, -1, 1, 34 + batch);
    DeviceArray<T> ddh0(dh0);
    rows.build(tokens.data(), t, S, vy, v0);
    DeviceArray<int> dcsr(rows.csr);
    ff::engine::embedding_scatter_add(tokens.data(), dh0.data(), dE.data(), ldE, dpos.data(), t, S, hx, vy, v0);
    ff::cuda::embedding_scatter_add(dcsr.p, rows.rows, ddh0.p, ddE.p, ldE, ddpos.p, t, S, hx, nullptr);
    CHECK(rel_diff(ddE.get(), dE) == 0);
    CHECK(rel_diff(ddpos.get(), dpos) == 0);
  }
}

TEST_CASE_TEMPLATE("cross-entropy on the second Y shard, with padding and targets on other shards", T, float, double,
                   bf16) {
  using M = master_t<T>;
  const long t = 13, vy = 300, v0 = 300, valid = 250;  // vocabulary 550: this shard's last 50 columns are padding
  auto logits = uniform<T>(t * vy, -4, 4, 9);
  std::vector<int> targets(t);
  std::mt19937 rng(10);
  for (int& x : targets) x = int(rng() % 600);  // some here, some on the first shard
  targets[0] = int(v0 + 7);                      // at least one here
  const M scale = M(1.0 / 64);
  std::vector<M> mx(t), st(2 * t);
  std::vector<T> dlogits(t * vy);
  ff::engine::cross_entropy_row_max(logits.data(), mx.data(), t, vy, valid);
  ff::engine::cross_entropy_exp_sums(logits.data(), targets.data(), mx.data(), dlogits.data(), st.data(), t, vy, v0,
                                     valid);
  const double loss = ff::engine::cross_entropy_finish(targets.data(), mx.data(), st.data(), dlogits.data(), t, vy,
                                                       v0, valid, scale);
  const std::vector<T> sevens(t * vy, T(7));
  DeviceArray<T> dlog(logits), dd(sevens);
  DeviceArray<M> dmx(mx), dst(st), dloss{std::vector<M>(size_t(t))};
  DeviceArray<int> dtargets(targets);
  ff::cuda::cross_entropy_row_max(dlog.p, dmx.p, t, vy, valid, nullptr);
  CHECK(rel_diff(dmx.get(), mx) < master_tolerance<T>());
  ff::cuda::cross_entropy_exp_sums(dlog.p, dtargets.p, dmx.p, dd.p, dst.p, t, vy, v0, valid, nullptr);
  CHECK(rel_diff(dst.get(), st) < master_tolerance<T>());
  ff::cuda::cross_entropy_finish(dtargets.p, dmx.p, dst.p, dd.p, dloss.p, t, vy, v0, valid, scale, nullptr);
  CHECK(rel_diff(dd.get(), dlogits) < tolerance<T>());  // the padding's 7s zeroed
  double gpu_loss = 0;
  for (M l : dloss.get()) gpu_loss += double(l);
  CHECK(std::abs(gpu_loss - loss) / std::abs(loss) < master_tolerance<T>());
}

TEST_CASE_TEMPLATE("AdamW: master weights, moments, the weight in T, and the gradient left zero", T, float, double,
                   bf16) {
  using M = master_t<T>;
  const size_t n = 5000;
  auto master = uniform<M>(n, -1, 1, 11), g = uniform<M>(n, -1e-2, 1e-2, 12), m = uniform<M>(n, -1e-3, 1e-3, 13),
       v = uniform<M>(n, 0, 1e-5, 14);
  ff::engine::AdamWStep<M> s{M(0.5), M(0.9), M(0.95), M(1e-3), M(1e-8), M(1 / (1 - 0.9 * 0.9)),
                             M(1 / (1 - 0.95 * 0.95)), M(0.1)};
  // The weight in T where it is not the master (bf16), poisoned with 9.
  constexpr bool separate = !std::is_same_v<T, M>;
  std::vector<T> w(separate ? n : 0, T(9));
  DeviceArray<M> dmaster(master), dg(g), dm(m), dv(v);
  DeviceArray<T> dw(w);
  ff::engine::adamw_update(master.data(), g.data(), m.data(), v.data(), separate ? w.data() : static_cast<T*>(nullptr),
                           n, s);
  ff::cuda::adamw_update(dmaster.p, dg.p, dm.p, dv.p, separate ? dw.p : static_cast<T*>(nullptr), n, s, nullptr);
  CHECK(rel_diff(dmaster.get(), master) < master_tolerance<T>());
  CHECK(rel_diff(dm.get(), m) < master_tolerance<T>());
  CHECK(rel_diff(dv.get(), v) < master_tolerance<T>());
  if (separate) CHECK(rel_diff(dw.get(), w) < tolerance<T>());
  for (M x : dg.get()) CHECK(x == M(0));
}

int main(int argc, char** argv) {
  // Without a GPU the runtime fails ("CUDA driver version is insufficient")
  // rather than count zero devices: any error means none (MODEL.md §7).
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no usable GPU: skipped\n");
    return 77;
  }
  doctest::Context context(argc, argv);
  return context.run();
}
