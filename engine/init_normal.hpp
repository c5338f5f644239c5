#pragma once
// The initial parameters' normal draws, fast. normal_from_hash (rng.hpp) calls
// libm's log and cos once per value: for GPT-2 124M that is 124M calls of
// each, ~30 ns a value, ~4 s of start-up on one core. Here the same Box-Muller
// formula runs on polynomials (Taylor series after range reduction, no tables,
// a few ns a value, vectorized), and libm is called only where the two could
// disagree.
//
// Exactness: for fp32 the stored value is float(stddev · normal). Wherever
// cos is not near a zero, the polynomial route is within ~1e-14 (relative) of
// libm's double result (measured: 2e-16 for log, 2e-15 for cos), so when the
// whole interval ±2⁻⁴⁰ (9e-13) around it rounds to one float, libm's double
// lies inside and rounds to the same float: the value is bit for bit the one
// normal_from_hash gives. Otherwise (about 1 value in 400: cos within 2⁻⁸ of
// 0, or a rounding boundary inside the interval) libm decides. fp64 has no
// rounding step to hide a last-bit difference, so it always uses libm (only
// the exactness tests run fp64, on small models).
#include <bit>
#include <cmath>
#include <cstddef>
#include <vector>

#include "engine/runtime/bf16.hpp"
#include <cstdint>
#include <type_traits>

#include "engine/rng.hpp"

namespace ff::engine {

// log(x) for x in (0, 1]: x = 2ᵉ·m with m in [√½, √2) (found from the bits,
// without a branch, as musl does), log m = 2·atanh(s), s = (m − 1)/(m + 1),
// |s| ≤ 0.172: the series 2s·Σ s²ᵏ/(2k+1) to k = 9 leaves < 1e-15. m − 1 is
// exact, so the result is relatively accurate near x = 1 too.
inline double poly_log(double x) {
  const uint64_t sqrt_half = 0x3FE6A09E00000000ull;  // the top bits of √½
  const uint64_t ix = std::bit_cast<uint64_t>(x) + (0x3FF0000000000000ull - sqrt_half);
  const int e = int(ix >> 52) - 1023;
  const double m = std::bit_cast<double>((ix & 0x000FFFFFFFFFFFFFull) + sqrt_half);
  const double f = m - 1, s = f / (2 + f), z = s * s;
  // Σ_{k≥1} zᵏ/(2k+1) by Horner, written out so that it vectorizes as is.
  const double r =
      z * (1.0 / 3 + z * (1.0 / 5 + z * (1.0 / 7 + z * (1.0 / 9 + z * (1.0 / 11 + z * (1.0 / 13 + z * (1.0 / 15 +
      z * (1.0 / 17 + z * (1.0 / 19)))))))));
  const double log_m = 2 * s + 2 * s * r;
  // ln 2 in two parts; the first has 42 significant bits, so e·hi is exact.
  const double ln2_hi = 0.6931471805598903, ln2_lo = 5.497923018708371e-14;
  return e * ln2_hi + (e * ln2_lo + log_m);
}

// cos(x) for x in [0, 2π]: x = n·π/2 + r, |r| ≤ π/4 (π/2 in fdlibm's three
// parts, so r carries no cancellation error), then cos r or sin r by Taylor
// series through r¹⁴ and r¹⁵ (< 1e-15 left), picked and signed by n mod 4
// without a branch (the quadrant is random: a branch would mispredict).
inline double poly_cos(double x) {
  const double shifter = 0x1.8p52;  // adding it rounds to an integer, left in the low bits
  const double k = x * 0.6366197723675814 + shifter;  // 2/π
  const uint64_t q = std::bit_cast<uint64_t>(k) & 3;
  const double n = k - shifter;
  const double P1 = 1.5707963267341256, P2 = 6.077100506303966e-11, P3 = 2.0222662487959506e-21;
  const double r = ((x - n * P1) - n * P2) - n * P3, z = r * r;
  // Coefficients ±1/k!, by Horner.
  const double c = 1 + z * (-1.0 / 2 + z * (1.0 / 24 + z * (-1.0 / 720 + z * (1.0 / 40320 + z * (-1.0 / 3628800 +
                   z * (1.0 / 479001600 + z * (-1.0 / 87178291200)))))));
  const double s = r + r * (z * (-1.0 / 6 + z * (1.0 / 120 + z * (-1.0 / 5040 + z * (1.0 / 362880 +
                   z * (-1.0 / 39916800 + z * (1.0 / 6227020800 + z * (-1.0 / 1307674368000))))))));
  // n mod 4 = 0: cos r, 1: −sin r, 2: −cos r, 3: sin r.
  const uint64_t odd = 0 - (q & 1);  // all ones for sin
  const uint64_t pick = (std::bit_cast<uint64_t>(s) & odd) | (std::bit_cast<uint64_t>(c) & ~odd);
  return std::bit_cast<double>(pick ^ (((q + 1) & 2) << 62));
}

// out[j] = float(stddev · normal_from_hash(splitmix64(row ^ cols[j]))), bit for
// bit, for one row of a tensor (row = row_key(tensor_key(seed, id), logical
// row), cols = logical columns). init_normal.cpp: vectorized, with versions
// for AVX-512 and AVX2 picked at load time.
void normal_row_fp32(uint64_t row, const long* cols, size_t n, double stddev, float* out);

// The same for any scalar; fp64 through libm (see the top of the file).
template <typename T>
void normal_row(uint64_t row, const long* cols, size_t n, double stddev, T* out) {
  if constexpr (std::is_same_v<T, float>) {
    normal_row_fp32(row, cols, n, stddev, out);
  } else if constexpr (std::is_same_v<T, bf16>) {  // the fp32 values, rounded
    thread_local std::vector<float> f;
    f.resize(n);
    normal_row_fp32(row, cols, n, stddev, f.data());
    for (size_t j = 0; j < n; ++j) out[j] = bf16(f[j]);
  } else {
    for (size_t j = 0; j < n; ++j) out[j] = T(stddev * normal_from_hash(splitmix64(row ^ uint64_t(cols[j]))));
  }
}

}  // namespace ff::engine
