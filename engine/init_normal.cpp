#include "engine/init_normal.hpp"

namespace ff::engine {

namespace {

// Everything but libm, per value: the hash, both uniforms, the polynomials,
// and float rounding of v·(1 ± 2⁻⁴⁰). Written without branches so that it
// vectorizes; where the float is not decided (cos near zero, or the interval
// straddling a rounding boundary) the output is NaN, for the caller to redo.
// The x86 clones: AVX-512 (x86-64-v4) converts and multiplies 64-bit lanes in
// one instruction each, AVX2 four doubles at a time, the default SSE2 two.
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#endif
void poly_row(uint64_t row, const long* __restrict cols, size_t n, double stddev, float* __restrict out) {
  const double tol = 0x1p-40;  // ≫ the polynomials' ~1e-14 (see init_normal.hpp)
  for (size_t j = 0; j < n; ++j) {
    const uint64_t h = splitmix64(row ^ uint64_t(cols[j]));
    const double u1 = unit_open(h), u2 = unit_open(splitmix64(h));
    const double c = poly_cos(6.283185307179586 * u2);
    const double v = stddev * (std::sqrt(-2.0 * poly_log(u1)) * c);
    const float lo = float(v * (1 - tol)), hi = float(v * (1 + tol));
    const bool decided = (lo == hi) & (std::abs(c) > 0x1p-8);
    out[j] = decided ? lo : __builtin_nanf("");
  }
}

}  // namespace

void normal_row_fp32(uint64_t row, const long* cols, size_t n, double stddev, float* out) {
  poly_row(row, cols, n, stddev, out);
  for (size_t j = 0; j < n; ++j)
    if (out[j] != out[j]) out[j] = float(stddev * normal_from_hash(splitmix64(row ^ uint64_t(cols[j]))));
}

}  // namespace ff::engine
