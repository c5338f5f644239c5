#pragma once
// The optimizer's two passes over a parameter arena: the sum of squares of the
// gradients (for the global norm) and the AdamW update. Both run over every
// parameter every step, so they are written to vectorize: no aliasing between
// the arrays (restrict), no errno from sqrt (-fno-math-errno, engine/meson.build),
// and no serial dependency chain through one running sum.
#include <cmath>
#include <cstddef>

#include "engine/runtime/bf16.hpp"

namespace ff::engine {

// Σ x² in double. One running sum is a chain of dependent adds that the
// compiler may not reorder (no -ffast-math): one element per add latency.
// Eight independent partial sums are eight chains it can run side by side in
// vector registers. The order of additions differs from a serial sum only by
// rounding; the norm is a sum over ranks anyway.
template <typename T>
double sum_of_squares(const T* __restrict x, size_t n) {
  constexpr size_t kLanes = 8;
  double acc[kLanes] = {};
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (size_t k = 0; k < kLanes; ++k) acc[k] += double(x[i + k]) * double(x[i + k]);
  double s = 0;
  for (; i < n; ++i) s += double(x[i]) * double(x[i]);
  for (size_t k = 0; k < kLanes; ++k) s += acc[k];
  return s;
}

// One step's constants: clip factor, moments' decay, bias corrections c1 = 1 /
// (1 − β1ᵗ) and c2 = 1 / (1 − β2ᵗ), decoupled weight decay.
template <typename T>
struct AdamWStep {
  T clip, beta1, beta2, lr, eps, c1, c2, decay;
};

// The master weight, m and v updated from the gradient g, which is left
// zero: the next step's accumulation starts from it, so no separate zeroing
// pass reads and writes the arena again. `w`, the weight in the training
// dtype, gets the new master rounded to it; nullptr where the master is the
// weight (fp32, fp64). One pass, every element independent.
template <typename T>
void adamw_update(master_t<T>* __restrict master, master_t<T>* __restrict g, master_t<T>* __restrict m,
                  master_t<T>* __restrict v, T* __restrict w, size_t n, const AdamWStep<master_t<T>>& s) {
  using M = master_t<T>;
  const M clip = s.clip, b1 = s.beta1, b2 = s.beta2, lr = s.lr, eps = s.eps, c1 = s.c1, c2 = s.c2,
          decay = s.decay;
  auto step = [&](size_t i) {
    M gi = g[i] * clip;
    M mi = b1 * m[i] + (M(1) - b1) * gi;
    M vi = b2 * v[i] + (M(1) - b2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    master[i] -= lr * ((mi * c1) / (std::sqrt(vi * c2) + eps) + decay * master[i]);
    g[i] = M(0);
  };
  // Two loops, so that neither has an aliasing question left to version.
  if (w == nullptr) {
    for (size_t i = 0; i < n; ++i) step(i);
  } else {
    for (size_t i = 0; i < n; ++i) {
      step(i);
      w[i] = T(master[i]);
    }
  }
}

}  // namespace ff::engine
