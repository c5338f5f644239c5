#pragma once
// Counter-based random numbers: a value is a pure function of its key, so a
// parameter's initial value depends on (tensor, logical row, logical column)
// and never on which rank holds it.
#include <cmath>
#include <cstdint>

namespace ff::engine {

inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

inline uint64_t key_hash(uint64_t seed, uint64_t a, uint64_t b, uint64_t c) {
  return splitmix64(splitmix64(splitmix64(splitmix64(seed) ^ a) ^ b) ^ c);
}

// Uniform in (0, 1) from the top 53 bits.
inline double unit_open(uint64_t h) { return (double(h >> 11) + 0.5) * (1.0 / 9007199254740992.0); }

// Standard normal (Box-Muller on two independent draws of the key).
inline double normal_at(uint64_t seed, uint64_t a, uint64_t b, uint64_t c) {
  uint64_t h = key_hash(seed, a, b, c);
  double u1 = unit_open(h), u2 = unit_open(splitmix64(h));
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

}  // namespace ff::engine
