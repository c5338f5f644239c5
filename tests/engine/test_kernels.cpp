// The engine's vectorized kernels against the plain formulas they replace:
// fp32 initial values bit for bit libm's Box-Muller (init_normal), exp_poly
// within 2 ulp of libm's exp, lane sums and maxima, the fused AdamW update;
// and the arrays' allocator on memory that comes zero-filled.
#include <doctest/doctest.h>
#include <mpi.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "engine/adamw.hpp"
#include "engine/gpt.hpp"
#include "engine/init_normal.hpp"
#include "engine/llama_layers.hpp"
#include "engine/mpi_comm.hpp"
#include "engine/rng.hpp"
#include "engine/vecmath.hpp"

using namespace ff;
using namespace ff::engine;

TEST_CASE("fp32 initial values equal float(stddev * normal_at(...)) bit for bit") {
  const uint64_t seed = 1234;
  long undecided = 0, values = 0;
  for (double stddev : {0.02, 0.02 / std::sqrt(24.0), 1.0}) {
    const uint64_t tensor = tensor_key(seed, 3);
    std::vector<long> cols(5000);
    for (size_t j = 0; j < cols.size(); ++j) cols[j] = long(j * 7 + 1);  // any logical columns
    std::vector<float> row(cols.size());
    for (long r = 0; r < 200; ++r) {
      const uint64_t key = row_key(tensor, uint64_t(r));
      normal_row(key, cols.data(), cols.size(), stddev, row.data());
      for (size_t j = 0; j < cols.size(); ++j) {
        const float want = float(stddev * normal_at(seed, 3, uint64_t(r), uint64_t(cols[j])));
        if (std::bit_cast<uint32_t>(row[j]) != std::bit_cast<uint32_t>(want)) {
          INFO("row " << r << " column " << cols[j] << ": " << row[j] << " vs " << want);
          CHECK(false);
        }
        ++values;
        // How often libm decided (for the message only).
        const uint64_t h = splitmix64(key ^ uint64_t(cols[j]));
        undecided += std::abs(std::cos(6.283185307179586 * unit_open(splitmix64(h)))) <= 0x1p-8;
      }
    }
  }
  MESSAGE(values << " values compared; cos within 2^-8 of 0 (libm decides) for " << undecided);
}

TEST_CASE("a model's fp32 matrices hold normal_at's values at their logical coordinates") {
  ModelSpec m;
  m.name = "init";
  m.layers = 2, m.hidden = 32, m.heads = 4, m.ffn = 128, m.vocab = 250, m.padded_vocab = 256, m.seq_len = 16;
  Config c;
  auto dev = make_cpu_device();
  MpiComm comm(MPI_COMM_SELF, c.grid, c.order, *dev);
  Gpt<float> model(comm, m, c, 77);
  const Coords co{};
  for (size_t mi = 0; mi < model.layout().matrices.size(); ++mi) {
    const MatrixParam& p = model.layout().matrices[mi];
    const float* w = model.matrix_values(int(mi));
    long differ = 0;
    for (size_t i = 0; i < p.shard_n; ++i) {
      long r, col;
      matrix_element(p, co, i, r, col);
      const float want = float(p.init_std * normal_at(77, uint64_t(p.id), uint64_t(r), uint64_t(col)));
      differ += std::bit_cast<uint32_t>(w[i]) != std::bit_cast<uint32_t>(want);
    }
    INFO(p.name);
    CHECK(differ == 0);
  }
}

TEST_CASE("unit_open converts the top 53 bits exactly") {
  for (uint64_t h : {uint64_t(0), ~uint64_t(0), uint64_t(1) << 63, (uint64_t(1) << 11) - 1, uint64_t(0x123456789abcdef0)})
    CHECK(unit_open(h) == (double(h >> 11) + 0.5) * (1.0 / 9007199254740992.0));
  for (uint64_t i = 0; i < 100000; ++i) {
    const uint64_t h = splitmix64(i);
    REQUIRE(unit_open(h) == (double(h >> 11) + 0.5) * (1.0 / 9007199254740992.0));
  }
}

TEST_CASE("exp_poly is within 2 ulp of libm's exp") {
  double worst_f = 0, worst_d = 0;
  for (double x = -87; x <= 88; x += 0.00137) {
    const float xf = float(x);
    const double ref = std::exp(double(xf));
    worst_f = std::max(worst_f, std::abs(double(exp_poly(xf)) - ref) / ref);
  }
  for (double x = -700; x <= 700; x += 0.0173) worst_d = std::max(worst_d, std::abs(exp_poly(x) / std::exp(x) - 1));
  MESSAGE("worst relative error: fp32 " << worst_f << ", fp64 " << worst_d);
  CHECK(worst_f <= 2 * 0x1p-24);
  CHECK(worst_d <= 2 * 0x1p-53);
  CHECK(exp_poly(0.0f) == 1.0f);
  CHECK(exp_poly(0.0) == 1.0);
  // Below the clamp: tiny, positive, never 0 or garbage; NaN stays NaN.
  CHECK(exp_poly(-1e4f) > 0);
  CHECK(exp_poly(-1e4f) < 1e-37f);
  CHECK(exp_poly(-1e6) > 0);
  CHECK(exp_poly(-1e6) < 1e-306);
  CHECK(std::isnan(exp_poly(std::nanf(""))));
  CHECK(std::isnan(exp_poly(std::nan(""))));
}

TEST_CASE("lane sums and maxima equal the serial ones") {
  for (size_t n : {size_t(1), size_t(7), size_t(8), size_t(9), size_t(64), size_t(1001)}) {
    std::vector<double> x(n);
    for (size_t i = 0; i < n; ++i) x[i] = normal_at(5, n, i, 0);
    double serial = 0, mx = x[0], sq = 0;
    for (double v : x) serial += v, mx = std::max(mx, v), sq += v * v;
    CHECK(sum_lanes<double>(n, [&](size_t j) { return x[j]; }) == doctest::Approx(serial).epsilon(1e-13));
    CHECK(sum_of_squares(x.data(), n) == doctest::Approx(sq).epsilon(1e-13));
    CHECK(max_lanes(x.data(), n) == mx);
  }
  CHECK(sum_lanes<float>(0, [](size_t) { return 1.0f; }) == 0);
}

TEST_CASE("the fused AdamW update is the scalar formula, and leaves the gradient zero") {
  const size_t n = 1003;
  std::vector<float> w(n), g(n), m(n), v(n);
  for (size_t i = 0; i < n; ++i) {
    w[i] = float(normal_at(9, 1, i, 0)), g[i] = float(normal_at(9, 2, i, 0));
    m[i] = float(0.1 * normal_at(9, 3, i, 0)), v[i] = float(std::abs(0.01 * normal_at(9, 4, i, 0)));
  }
  AdamWStep<float> s{0.5f, 0.9f, 0.95f, 1e-3f, 1e-8f, 1.25f, 1.5f, 0.1f};
  std::vector<float> w2 = w, m2 = m, v2 = v;
  for (size_t i = 0; i < n; ++i) {  // the loop the engine had before
    float gi = g[i] * s.clip;
    m2[i] = s.beta1 * m2[i] + (1 - s.beta1) * gi;
    v2[i] = s.beta2 * v2[i] + (1 - s.beta2) * gi * gi;
    w2[i] -= s.lr * ((m2[i] * s.c1) / (std::sqrt(v2[i] * s.c2) + s.eps) + s.decay * w2[i]);
  }
  std::vector<float> g_copy = g;
  adamw_update<float>(w.data(), g.data(), m.data(), v.data(), nullptr, n, s);
  for (size_t i = 0; i < n; ++i) {
    REQUIRE(w[i] == w2[i]);
    REQUIRE(m[i] == m2[i]);
    REQUIRE(v[i] == v2[i]);
    REQUIRE(g[i] == 0);
  }

  // bf16: the same update on the fp32 master, and the weight the GEMMs read
  // is the new master rounded to nearest even (bits worked out below).
  std::vector<float> master(n, 0.0f), m3(n, 0.0f), v3(n, 0.0f);
  std::vector<bf16> wb(n);
  for (size_t i = 0; i < n; ++i) master[i] = w2[i];  // any values
  std::vector<float> expect = master;
  for (size_t i = 0; i < n; ++i) {
    float gi = g_copy[i] * s.clip;
    float mi = (1 - s.beta1) * gi, vi = (1 - s.beta2) * gi * gi;
    expect[i] -= s.lr * ((mi * s.c1) / (std::sqrt(vi * s.c2) + s.eps) + s.decay * expect[i]);
  }
  adamw_update<bf16>(master.data(), g_copy.data(), m3.data(), v3.data(), wb.data(), n, s);
  for (size_t i = 0; i < n; ++i) {
    REQUIRE(master[i] == expect[i]);
    const uint32_t u = std::bit_cast<uint32_t>(expect[i]);
    const uint32_t lower = u & 0xffffu, upper = u >> 16;
    const uint32_t rounded = lower > 0x8000u || (lower == 0x8000u && (upper & 1u)) ? upper + 1 : upper;
    REQUIRE(wb[i].bits == rounded);
    REQUIRE(g_copy[i] == 0);
  }
}

// A bf16 GEMM is the fp32 product of the bf16 values (fp32 accumulation, as
// cuBLAS's), rounded once: held against a plain triple loop in double.
TEST_CASE("bf16 GEMMs: fp32 accumulation, rounded once; into an fp32 accumulator with beta 1") {
  auto dev = make_cpu_device();
  const int m = 37, n = 29, k = 53;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      INFO("ta " << ta << " tb " << tb);
      std::vector<bf16> A(size_t(m) * k), B(size_t(k) * n), C(size_t(m) * n);
      std::vector<float> Cm(size_t(m) * n);
      for (size_t i = 0; i < A.size(); ++i) A[i] = bf16(float(normal_at(5, 1, i, 0)));
      for (size_t i = 0; i < B.size(); ++i) B[i] = bf16(float(normal_at(5, 2, i, 0)));
      for (size_t i = 0; i < Cm.size(); ++i) Cm[i] = float(normal_at(5, 3, i, 0));
      const std::vector<float> C0 = Cm;
      auto a = [&](int i, int p) { return double(float(ta ? A[size_t(p) * m + i] : A[size_t(i) * k + p])); };
      auto b = [&](int p, int j) { return double(float(tb ? B[size_t(j) * k + p] : B[size_t(p) * n + j])); };
      host_gemm(*dev, ta, tb, m, n, k, 0.5f, A.data(), ta ? m : k, B.data(), tb ? k : n, 0.0f, C.data(), n);
      host_gemm(*dev, ta, tb, m, n, k, 1.0f, A.data(), ta ? m : k, B.data(), tb ? k : n, 1.0f, Cm.data(), n);
      for (int i = 0; i < m; ++i)
        for (int j = 0; j < n; ++j) {
          double exact = 0;
          for (int p = 0; p < k; ++p) exact += a(i, p) * b(p, j);
          // fp32 accumulation of 53 products of bf16 values is within ~1e-6
          // relative of the exact sum; rounding to bf16 adds half an ulp (2^-9).
          const double got = float(C[size_t(i) * n + j]);
          REQUIRE(std::abs(got - 0.5 * exact) <= std::abs(0.5 * exact) * 0x1p-8 + 1e-5);
          REQUIRE(std::abs(Cm[size_t(i) * n + j] - (C0[size_t(i) * n + j] + exact)) <=
                  1e-5 * (std::abs(exact) + std::abs(C0[size_t(i) * n + j]) + 1));
        }
    }
}

namespace {
std::vector<bf16> bf16_values(uint64_t id, size_t n, double scale = 1) {
  std::vector<bf16> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = bf16(float(scale * normal_at(11, id, i, 0)));
  return v;
}
std::vector<float> widened(const std::vector<bf16>& v) { return std::vector<float>(v.begin(), v.end()); }
// Every bf16 output is its fp32 twin's value rounded to nearest even.
void check_rounded(const std::vector<bf16>& got, const std::vector<float>& twin) {
  REQUIRE(got.size() == twin.size());
  for (size_t i = 0; i < got.size(); ++i) REQUIRE(got[i].bits == bf16::round(twin[i]));
}
}  // namespace

// The bf16 layers read bf16, compute in fp32 and round once, at the store:
// each is the fp32 layer run on the widened inputs, its bf16 outputs rounded
// and its fp32 statistics and accumulators equal. (The fp32 layers are held
// against finite differences in test_gradients.cpp.)
TEST_CASE("bf16 layers are their fp32 twins on the widened inputs, rounded once") {
  const long t = 6, hx = 40, H = 80, vy = 50, v0 = 50, valid = 37;
  const auto x = bf16_values(1, size_t(t * hx), 3), gamma = bf16_values(2, size_t(hx)),
             beta = bf16_values(3, size_t(hx)), dy = bf16_values(4, size_t(t * hx));
  const auto xf = widened(x), gf = widened(gamma), bf = widened(beta), dyf = widened(dy);
  SUBCASE("layernorm forward and backward") {
    std::vector<float> sum(t), mean(t), sq(t), rstd(t), sum_f(t), mean_f(t), sq_f(t), rstd_f(t);
    std::vector<bf16> y(t * hx), xhat(t * hx), dx(t * hx);
    std::vector<float> y_f(t * hx), xhat_f(t * hx), dx_f(t * hx);
    layernorm_row_sums(x.data(), sum.data(), t, hx);
    layernorm_row_sums(xf.data(), sum_f.data(), t, hx);
    CHECK(sum == sum_f);
    layernorm_centred_squares(x.data(), sum.data(), mean.data(), sq.data(), t, hx, H);
    layernorm_centred_squares(xf.data(), sum_f.data(), mean_f.data(), sq_f.data(), t, hx, H);
    CHECK(sq == sq_f);
    layernorm_normalize(x.data(), mean.data(), sq.data(), gamma.data(), beta.data(), y.data(), xhat.data(),
                        rstd.data(), t, hx, H);
    layernorm_normalize(xf.data(), mean_f.data(), sq_f.data(), gf.data(), bf.data(), y_f.data(), xhat_f.data(),
                        rstd_f.data(), t, hx, H);
    CHECK(rstd == rstd_f);
    check_rounded(y, y_f);
    check_rounded(xhat, xhat_f);
    // Backward from the rounded x̂ (what the bf16 forward kept).
    const std::vector<float> xhat_w = widened(xhat);
    std::vector<float> stat(2 * t), stat_f(2 * t), dg(hx, 0.5f), db(hx, 0.25f), dg_f = dg, db_f = db;
    layernorm_backward_sums(dy.data(), xhat.data(), gamma.data(), stat.data(), t, hx);
    layernorm_backward_sums(dyf.data(), xhat_w.data(), gf.data(), stat_f.data(), t, hx);
    CHECK(stat == stat_f);
    layernorm_backward_apply(dy.data(), xhat.data(), rstd.data(), gamma.data(), stat.data(), dx.data(), dg.data(),
                             db.data(), t, hx, H);
    layernorm_backward_apply(dyf.data(), xhat_w.data(), rstd_f.data(), gf.data(), stat_f.data(), dx_f.data(),
                             dg_f.data(), db_f.data(), t, hx, H);
    check_rounded(dx, dx_f);
    CHECK(dg == dg_f);
    CHECK(db == db_f);
  }
  SUBCASE("GELU forward and backward") {
    std::vector<bf16> y(t * hx), dx(t * hx);
    std::vector<float> y_f(t * hx), dx_f(t * hx);
    gelu_forward(x.data(), y.data(), t * hx);
    gelu_forward(xf.data(), y_f.data(), t * hx);
    check_rounded(y, y_f);
    gelu_backward(x.data(), dy.data(), dx.data(), t * hx);
    gelu_backward(xf.data(), dyf.data(), dx_f.data(), t * hx);
    check_rounded(dx, dx_f);
  }
  SUBCASE("cross-entropy over a vocabulary shard with padding") {
    const auto logits = bf16_values(5, size_t(t * vy), 4);
    const auto lf = widened(logits);
    std::vector<int> targets(t);
    for (long i = 0; i < t; ++i) targets[i] = int(v0 + (i * 7) % (valid + 5)) - (i == 2 ? 40 : 0);  // some elsewhere
    std::vector<float> mx(t), st(2 * t), mx_f(t), st_f(2 * t), e_f(t * vy);
    std::vector<bf16> d(t * vy);
    cross_entropy_row_max(logits.data(), mx.data(), t, vy, valid);
    cross_entropy_row_max(lf.data(), mx_f.data(), t, vy, valid);
    CHECK(mx == mx_f);
    cross_entropy_exp_sums(logits.data(), targets.data(), mx.data(), d.data(), st.data(), t, vy, v0, valid);
    cross_entropy_exp_sums(lf.data(), targets.data(), mx_f.data(), e_f.data(), st_f.data(), t, vy, v0, valid);
    CHECK(st == st_f);  // the sums of the unrounded exponentials
    check_rounded(std::vector<bf16>(d.begin(), d.begin() + valid), std::vector<float>(e_f.begin(), e_f.begin() + valid));
    // finish from the rounded exponentials the bf16 path kept
    std::vector<float> d_f = widened(d);
    const double loss = cross_entropy_finish(targets.data(), mx.data(), st.data(), d.data(), t, vy, v0, valid, 0.5f);
    const double loss_f =
        cross_entropy_finish(targets.data(), mx_f.data(), st_f.data(), d_f.data(), t, vy, v0, valid, 0.5f);
    CHECK(loss == loss_f);
    check_rounded(d, d_f);
  }
}

TEST_CASE("the norms fused on whole rows are the split steps with hx = H, bit for bit") {
  // bf16: x̂ and y are rounded, the statistics and dγ, dβ in fp32.
  const long t = 5, H = 40;
  const auto x = bf16_values(1, size_t(t * H), 3), gamma = bf16_values(2, size_t(H)),
             beta = bf16_values(3, size_t(H)), dy = bf16_values(4, size_t(t * H));
  std::vector<float> sum(t), mean(t), sq(t), rstd(t), rstd_fused(t), stat(2 * t);
  std::vector<bf16> y(t * H), xhat(t * H), dx(t * H), y_fused(t * H), xhat_fused(t * H), dx_fused(t * H);
  std::vector<float> dg(H, 0.5f), db(H, 0.25f), dg_fused = dg, db_fused = db;
  const auto bits = [](const std::vector<bf16>& v) {
    std::vector<uint16_t> b(v.size());
    std::memcpy(b.data(), v.data(), v.size() * sizeof(bf16));
    return b;
  };
  SUBCASE("layernorm") {
    layernorm_row_sums(x.data(), sum.data(), t, H);
    layernorm_centred_squares(x.data(), sum.data(), mean.data(), sq.data(), t, H, H);
    layernorm_normalize(x.data(), mean.data(), sq.data(), gamma.data(), beta.data(), y.data(), xhat.data(),
                        rstd.data(), t, H, H);
    layernorm_backward_sums(dy.data(), xhat.data(), gamma.data(), stat.data(), t, H);
    layernorm_backward_apply(dy.data(), xhat.data(), rstd.data(), gamma.data(), stat.data(), dx.data(), dg.data(),
                             db.data(), t, H, H);
    layernorm_forward(x.data(), gamma.data(), beta.data(), y_fused.data(), xhat_fused.data(), rstd_fused.data(), t, H);
    layernorm_backward(dy.data(), xhat_fused.data(), rstd_fused.data(), gamma.data(), dx_fused.data(),
                       dg_fused.data(), db_fused.data(), t, H);
  }
  SUBCASE("rmsnorm") {
    rmsnorm_row_squares(x.data(), sq.data(), t, H);
    rmsnorm_normalize(x.data(), sq.data(), gamma.data(), y.data(), xhat.data(), rstd.data(), t, H, H);
    rmsnorm_backward_sums(dy.data(), xhat.data(), gamma.data(), stat.data(), t, H);
    rmsnorm_backward_apply(dy.data(), xhat.data(), rstd.data(), gamma.data(), stat.data(), dx.data(), dg.data(), t,
                           H, H);
    rmsnorm_forward(x.data(), gamma.data(), y_fused.data(), xhat_fused.data(), rstd_fused.data(), t, H);
    rmsnorm_backward(dy.data(), xhat_fused.data(), rstd_fused.data(), gamma.data(), dx_fused.data(), dg_fused.data(),
                     t, H);
  }
  CHECK(bits(y_fused) == bits(y));
  CHECK(bits(xhat_fused) == bits(xhat));
  CHECK(bits(dx_fused) == bits(dx));
  CHECK(rstd_fused == rstd);
  CHECK(dg_fused == dg);
  CHECK(db_fused == db);
}

namespace {
// A device memory stand-in that says it comes zero-filled but is filled with
// 0xAB: what the allocator does not write stays 0xAB.
void* sentinel_allocate(size_t bytes) {
  void* p = ::operator new(bytes);
  std::memset(p, 0xAB, bytes);
  return p;
}
void sentinel_deallocate(void* p, size_t) { ::operator delete(p); }
}  // namespace

TEST_CASE("arrays in zero-filled memory: zero elements are not written, others are") {
  BufferMemoryState& st = buffer_memory_state();
  const BufferMemoryState saved = st;
  const BufferMemory zeroed{sentinel_allocate, sentinel_deallocate, true};
  const BufferMemory plain{sentinel_allocate, sentinel_deallocate, false};
  uint64_t sentinel = 0;
  std::memset(&sentinel, 0xAB, sizeof sentinel);
  st.memory = &zeroed;
  {
    Buffer<double> a(3);  // value-initialised: left to the memory's zeros
    a.assign(4, 0.0);     // reallocates: each element constructed from 0.0
    Buffer<double> b(3, 2.5);
    const std::vector<double> zeros(3, 0.0);
    Buffer<double> c(zeros.begin(), zeros.end());  // copied zeros: not written either
    CHECK(std::bit_cast<uint64_t>(a[0]) == sentinel);
    CHECK(std::bit_cast<uint64_t>(a[3]) == sentinel);
    CHECK(std::bit_cast<uint64_t>(c[1]) == sentinel);
    CHECK(b[0] == 2.5);
    CHECK(b[2] == 2.5);
  }
  st.memory = &plain;
  {
    Buffer<double> a(3), b(2, 0.0);
    CHECK(a[1] == 0.0);
    CHECK(b[1] == 0.0);
  }
  st = saved;
}
