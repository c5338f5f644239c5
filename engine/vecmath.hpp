#pragma once
// Element-wise math and row reductions written so that the compiler
// vectorizes them without -ffast-math: an exp from plain arithmetic (a call
// into libm's exp keeps a loop scalar), and sums and maxima over eight
// independent lanes (one running sum is a dependency chain the compiler may
// not reorder). Used by the layers (GELU, softmax, LayerNorm, cross-entropy).
#include <bit>
#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace ff::engine {

// e^x: x = n·ln 2 + r, |r| ≤ ½ln 2 (ln 2 in two parts, the first short enough
// that n·hi is exact), e^r by its Taylor series (through r⁷ in fp32, r¹³ in
// fp64: under half an ulp left), times 2ⁿ put straight into the exponent
// bits. x is clamped so that 2ⁿ stays a normal number: below the clamp the
// result is the smallest value it gives (~1e-38 in fp32, ~1e-307 in fp64)
// instead of a smaller one or 0, which no sum or ratio here can tell apart.
// NaN stays NaN. Within ~2 ulp of libm.
template <typename T>
inline T exp_poly(T x) {
  if constexpr (std::is_same_v<T, float>) {
    x = x < -87.0f ? -87.0f : x;
    x = x > 88.0f ? 88.0f : x;
    const float shifter = 0x1.8p23f;  // adding it rounds to an integer, left in the low bits
    const float k = x * 1.44269504f + shifter;
    const int32_t n = std::bit_cast<int32_t>(k) - std::bit_cast<int32_t>(shifter);
    const float nf = k - shifter;
    const float r = (x - nf * 0.693359375f) - nf * -2.12194440e-4f;
    const float p =
        1 + r * (1 + r * (1.0f / 2 + r * (1.0f / 6 + r * (1.0f / 24 + r * (1.0f / 120 + r * (1.0f / 720 +
        r * (1.0f / 5040)))))));
    return p * std::bit_cast<float>(uint32_t(n + 127) << 23);
  } else {
    x = x < -708.0 ? -708.0 : x;
    x = x > 709.0 ? 709.0 : x;
    const double shifter = 0x1.8p52;
    const double k = x * 1.4426950408889634 + shifter;
    const int64_t n = std::bit_cast<int64_t>(k) - std::bit_cast<int64_t>(shifter);
    const double nf = k - shifter;
    const double r = (x - nf * 6.93147180369123816490e-01) - nf * 1.90821492927058770002e-10;
    const double p =
        1 + r * (1 + r * (1.0 / 2 + r * (1.0 / 6 + r * (1.0 / 24 + r * (1.0 / 120 + r * (1.0 / 720 +
        r * (1.0 / 5040 + r * (1.0 / 40320 + r * (1.0 / 362880 + r * (1.0 / 3628800 + r * (1.0 / 39916800 +
        r * (1.0 / 479001600 + r * (1.0 / 6227020800)))))))))))));
    return p * std::bit_cast<double>(uint64_t(n + 1023) << 52);
  }
}

constexpr size_t kLanes = 8;

// Σ term(j) for j < n, in kLanes partial sums.
template <typename T, typename F>
inline T sum_lanes(size_t n, F term) {
  T acc[kLanes] = {};
  size_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (size_t k = 0; k < kLanes; ++k) acc[k] += term(j + k);
  T s = 0;
  for (; j < n; ++j) s += term(j);
  for (size_t k = 0; k < kLanes; ++k) s += acc[k];
  return s;
}

// max x[j] for j < n (n ≥ 1), in kLanes partial maxima (the same value in
// any order).
template <typename T>
inline T max_lanes(const T* x, size_t n) {
  T acc[kLanes];
  for (size_t k = 0; k < kLanes; ++k) acc[k] = x[0];
  size_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (size_t k = 0; k < kLanes; ++k) acc[k] = acc[k] < x[j + k] ? x[j + k] : acc[k];
  T m = x[0];
  for (; j < n; ++j) m = m < x[j] ? x[j] : m;
  for (size_t k = 0; k < kLanes; ++k) m = m < acc[k] ? acc[k] : m;
  return m;
}

}  // namespace ff::engine
