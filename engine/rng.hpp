#pragma once
// Counter-based random numbers: a value is a pure function of its key, so a
// parameter's initial value depends on (tensor, logical row, logical column)
// and never on which rank holds it.
#include <bit>
#include <cmath>
#include <cstdint>

namespace ff::engine {

inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// The key hashed a level at a time, so a loop over a tensor's rows and
// columns hashes the tensor once, each row once and each value once:
// key_hash(seed, a, b, c) = splitmix64(row_key(tensor_key(seed, a), b) ^ c).
inline uint64_t tensor_key(uint64_t seed, uint64_t a) { return splitmix64(splitmix64(seed) ^ a); }
inline uint64_t row_key(uint64_t tensor, uint64_t b) { return splitmix64(tensor ^ b); }
inline uint64_t key_hash(uint64_t seed, uint64_t a, uint64_t b, uint64_t c) {
  return splitmix64(row_key(tensor_key(seed, a), b) ^ c);
}

// Uniform in (0, 1) from the top 53 bits: (a + ½)·2⁻⁵³, a = h >> 11. a is
// converted exactly in two 32-bit halves, each placed in a double's mantissa
// by its bits: x86 before AVX-512 has no vector instruction converting 64-bit
// integers, so double(a) would keep loops over many values scalar.
inline double unit_open(uint64_t h) {
  const uint64_t a = h >> 11;
  const double hi = std::bit_cast<double>(0x4530000000000000ull | (a >> 32)) - 0x1p84;          // (a >> 32)·2³²
  const double lo = std::bit_cast<double>(0x4330000000000000ull | (a & 0xFFFFFFFFull)) - 0x1p52;  // low 32 bits
  return ((hi + lo) + 0.5) * (1.0 / 9007199254740992.0);
}

// Standard normal (Box-Muller on two independent draws of the key's hash).
inline double normal_from_hash(uint64_t h) {
  double u1 = unit_open(h), u2 = unit_open(splitmix64(h));
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}
inline double normal_at(uint64_t seed, uint64_t a, uint64_t b, uint64_t c) {
  return normal_from_hash(key_hash(seed, a, b, c));
}

}  // namespace ff::engine
