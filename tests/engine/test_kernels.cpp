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

#include "adamw.hpp"
#include "gpt.hpp"
#include "init_normal.hpp"
#include "mpi_comm.hpp"
#include "rng.hpp"
#include "vecmath.hpp"

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
  adamw_update(w.data(), g.data(), m.data(), v.data(), n, s);
  for (size_t i = 0; i < n; ++i) {
    REQUIRE(w[i] == w2[i]);
    REQUIRE(m[i] == m2[i]);
    REQUIRE(v[i] == v2[i]);
    REQUIRE(g[i] == 0);
  }
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
