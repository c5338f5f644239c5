#pragma once
// The layers a Llama-style block has and a GPT block does not (MODEL.md §12):
// RMSNorm over a hidden dimension split over X, the SwiGLU product, rotary
// positions on whole heads. Plain loops over row-major [tokens, columns]
// activations, as layers.hpp; T is the training dtype and M = master_t<T>
// the type each kernel computes and keeps statistics in.
#include <cmath>

#include "engine/layers.hpp"

namespace ff::engine {

// RMSNorm: y = x·rstd·γ, rstd = 1/√(mean(x²) + ε); one reduction over X
// each way (t values): the sums of squares forward, Σ dy·γ·x̂ backward.
template <typename T>
void rmsnorm_row_squares(const T* x, master_t<T>* sq, long t, long hx) {
  using M = master_t<T>;
  for (long i = 0; i < t; ++i) {
    const T* xr = x + i * hx;
    sq[i] = sum_lanes<M>(size_t(hx), [xr](size_t j) { return M(xr[j]) * M(xr[j]); });
  }
}

// sq (reduced over X) → rstd; writes x̂ = x·rstd and y = x̂·γ.
template <typename T>
void rmsnorm_normalize(const T* x, const master_t<T>* sq, const T* gamma, T* y, T* xhat, master_t<T>* rstd, long t,
                       long hx, long H) {
  using M = master_t<T>;
  for (long i = 0; i < t; ++i) {
    const M r = rstd[i] = M(1) / std::sqrt(sq[i] / M(H) + M(kLayerNormEps));
    const T* xr = x + i * hx;
    T* xh = xhat + i * hx;
    T* yr = y + i * hx;
    for (long j = 0; j < hx; ++j) {
      const M v = M(xr[j]) * r;
      xh[j] = T(v);
      yr[j] = T(v * M(gamma[j]));
    }
  }
}

// Backward: dx = rstd·(g − x̂·mean(g·x̂)), g = dy·γ (LayerNorm's without the
// mean term); stat[i] = Σ_j g·x̂ is reduced over X between the steps.
template <typename T>
void rmsnorm_backward_sums(const T* dy, const T* xhat, const T* gamma, master_t<T>* stat, long t, long hx) {
  using M = master_t<T>;
  for (long i = 0; i < t; ++i) {
    const T* d = dy + i * hx;
    const T* xh = xhat + i * hx;
    stat[i] = sum_lanes<M>(size_t(hx), [d, gamma, xh](size_t j) { return M(d[j]) * M(gamma[j]) * M(xh[j]); });
  }
}

// dγ accumulates.
template <typename T>
void rmsnorm_backward_apply(const T* dy, const T* xhat, const master_t<T>* rstd, const T* gamma,
                            const master_t<T>* stat, T* dx, master_t<T>* dgamma, long t, long hx, long H) {
  using M = master_t<T>;
  for (long i = 0; i < t; ++i) {
    const M mb = stat[i] / M(H), r = rstd[i];
    const T* d = dy + i * hx;
    const T* xh = xhat + i * hx;
    T* dxr = dx + i * hx;
    for (long j = 0; j < hx; ++j) dxr[j] = T(r * (M(d[j]) * M(gamma[j]) - M(xh[j]) * mb));
    for (long j = 0; j < hx; ++j) dgamma[j] += M(d[j]) * M(xh[j]);
  }
}

// RMSNorm on whole rows (hx = H), a row at a time through the steps above,
// as layernorm_forward and layernorm_backward (layers.hpp).
template <typename T>
void rmsnorm_forward(const T* x, const T* gamma, T* y, T* xhat, master_t<T>* rstd, long t, long H) {
  for (long i = 0; i < t; ++i) {
    master_t<T> sq;
    const long at = i * H;
    rmsnorm_row_squares(x + at, &sq, 1, H);
    rmsnorm_normalize(x + at, &sq, gamma, y + at, xhat + at, rstd + i, 1, H, H);
  }
}

template <typename T>
void rmsnorm_backward(const T* dy, const T* xhat, const master_t<T>* rstd, const T* gamma, T* dx, master_t<T>* dgamma,
                      long t, long H) {
  for (long i = 0; i < t; ++i) {
    master_t<T> stat;
    const long at = i * H;
    rmsnorm_backward_sums(dy + at, xhat + at, gamma, &stat, 1, H);
    rmsnorm_backward_apply(dy + at, xhat + at, rstd + i, gamma, &stat, dx + at, dgamma, 1, H, H);
  }
}

// σ(v) through exp_poly, as GELU's tanh (layers.hpp).
template <typename M>
inline M sigmoid(M v) {
  return M(1) / (M(1) + exp_poly(-v));
}

// SwiGLU on a Y block: f is [t, 2·fy], each row this rank's gate columns then
// its matching up columns (one H → 2F layer, MODEL.md §12); g = SiLU(gate)·up,
// [t, fy].
template <typename T>
void swiglu_forward(const T* f, T* g, long t, long fy) {
  using M = master_t<T>;
  for (long i = 0; i < t; ++i) {
    const T* gate = f + i * 2 * fy;
    const T* up = gate + fy;
    T* out = g + i * fy;
    for (long j = 0; j < fy; ++j) {
      const M a = M(gate[j]);
      out[j] = T(a * sigmoid(a) * M(up[j]));
    }
  }
}

// d gate = dg·up·SiLU'(gate), SiLU'(a) = σ(a)·(1 + a·(1 − σ(a))); d up = dg·SiLU(gate).
template <typename T>
void swiglu_backward(const T* f, const T* dg, T* df, long t, long fy) {
  using M = master_t<T>;
  for (long i = 0; i < t; ++i) {
    const T* gate = f + i * 2 * fy;
    const T* up = gate + fy;
    const T* d = dg + i * fy;
    T* dgate = df + i * 2 * fy;
    T* dup = dgate + fy;
    for (long j = 0; j < fy; ++j) {
      const M a = M(gate[j]), s = sigmoid(a), dj = M(d[j]);
      dgate[j] = T(dj * M(up[j]) * s * (M(1) + a * (M(1) - s)));
      dup[j] = T(dj * a * s);
    }
  }
}

// Rotary positions (Su et al. 2021, in the Hugging Face Llama layout: the
// pairs of a head are columns (j, j + d_h/2)), applied in place to the Q and
// K heads of qkv [t, (heads + 2·kv_heads)·dh] (this Y rank's whole heads:
// the rotation needs nothing from another rank). Token i sits at position
// i mod S; pair j turns by pos·θ^(−2j/d_h). `inverse` turns the other way:
// backward's gradient of the unrotated Q and K from that of the rotated.
constexpr double kRopeTheta = 10000;

template <typename T>
void rope_rotate(T* qkv, long t, long S, long heads, long kv_heads, long dh, bool inverse) {
  using M = master_t<T>;
  const long ld = (heads + 2 * kv_heads) * dh, half = dh / 2, rotated = heads + kv_heads;  // Q, then K
  const size_t pairs = size_t(half);
  std::vector<M> c(pairs), s(pairs);
  for (long i = 0; i < t; ++i) {
    const double pos = double(i % S);
    for (long j = 0; j < half; ++j) {
      const double angle = pos * std::pow(kRopeTheta, -2.0 * double(j) / double(dh));
      c[size_t(j)] = M(std::cos(angle));
      s[size_t(j)] = M(inverse ? -std::sin(angle) : std::sin(angle));
    }
    for (long h = 0; h < rotated; ++h) {
      T* x = qkv + i * ld + h * dh;
      for (long j = 0; j < half; ++j) {
        const M a = M(x[j]), b = M(x[j + half]);
        x[j] = T(a * c[size_t(j)] - b * s[size_t(j)]);
        x[j + half] = T(b * c[size_t(j)] + a * s[size_t(j)]);
      }
    }
  }
}

}  // namespace ff::engine
