#pragma once
// The non-GEMM layers of the block on one rank's slice, as pure functions of
// buffers and shapes: LayerNorm over a hidden dimension split over X, GELU,
// causal attention on whole heads, vocabulary-parallel cross-entropy over Y.
// A layer whose math needs a reduction (MODEL.md §1) is split into the local
// steps around it; the schedule (gpt.cpp) launches each step as a kernel and
// issues the reduction between them. Plain loops; activations are row-major
// [tokens, columns]. Each loop is written to vectorize: exp_poly instead of
// libm's exp, sums over rows in lanes (vecmath.hpp).
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "device.hpp"
#include "matmul.hpp"
#include "vecmath.hpp"

namespace ff::engine {

constexpr double kLayerNormEps = 1e-5;

// LayerNorm over the full hidden size H, of which this rank holds `hx`
// columns, in the three local steps around its two reductions over X: the
// sum, then the centred sum of squares (E[x²] − mean² cancels in fp32).
// y = (x − mean)·rstd·γ + β.
template <typename T>
void layernorm_row_sums(const T* x, T* sum, long t, long hx) {
  for (long i = 0; i < t; ++i) {
    const T* xr = x + i * hx;
    sum[i] = sum_lanes<T>(size_t(hx), [xr](size_t j) { return xr[j]; });
  }
}

// sum (reduced over X) → mean; writes the centred sums of squares to `sq`.
template <typename T>
void layernorm_centred_squares(const T* x, const T* sum, T* mean, T* sq, long t, long hx, long H) {
  for (long i = 0; i < t; ++i) {
    const T* xr = x + i * hx;
    const T m = mean[i] = sum[i] / T(H);
    sq[i] = sum_lanes<T>(size_t(hx), [xr, m](size_t j) { return (xr[j] - m) * (xr[j] - m); });
  }
}

// sq (reduced over X) → rstd; writes x̂ and y.
template <typename T>
void layernorm_normalize(const T* x, const T* mean, const T* sq, const T* gamma, const T* beta, T* y, T* xhat,
                         T* rstd, long t, long hx, long H) {
  for (long i = 0; i < t; ++i) {
    const T r = rstd[i] = T(1) / std::sqrt(sq[i] / T(H) + T(kLayerNormEps)), m = mean[i];
    const T* xr = x + i * hx;
    T* xh = xhat + i * hx;
    T* yr = y + i * hx;
    for (long j = 0; j < hx; ++j) {
      const T v = (xr[j] - m) * r;
      xh[j] = v;
      yr[j] = v * gamma[j] + beta[j];
    }
  }
}

// Backward: dx = rstd·(g − mean(g) − x̂·mean(g·x̂)), g = dy·γ; the two sums
// per token (2t values) are reduced over X between the steps.
template <typename T>
void layernorm_backward_sums(const T* dy, const T* xhat, const T* gamma, T* stat, long t, long hx) {
  for (long i = 0; i < t; ++i) {
    const T* d = dy + i * hx;
    const T* xh = xhat + i * hx;
    stat[2 * i] = sum_lanes<T>(size_t(hx), [d, gamma](size_t j) { return d[j] * gamma[j]; });
    stat[2 * i + 1] = sum_lanes<T>(size_t(hx), [d, gamma, xh](size_t j) { return d[j] * gamma[j] * xh[j]; });
  }
}

// dγ, dβ accumulate.
template <typename T>
void layernorm_backward_apply(const T* dy, const T* xhat, const T* rstd, const T* gamma, const T* stat, T* dx,
                              T* dgamma, T* dbeta, long t, long hx, long H) {
  for (long i = 0; i < t; ++i) {
    const T ma = stat[2 * i] / T(H), mb = stat[2 * i + 1] / T(H), r = rstd[i];
    const T* d = dy + i * hx;
    const T* xh = xhat + i * hx;
    T* dxr = dx + i * hx;
    // Two loops: one with all three outputs needs more runtime alias checks
    // than GCC versions a loop for, and stays scalar.
    for (long j = 0; j < hx; ++j) dxr[j] = r * (d[j] * gamma[j] - ma - xh[j] * mb);
    for (long j = 0; j < hx; ++j) {
      dgamma[j] += d[j] * xh[j];
      dbeta[j] += d[j];
    }
  }
}

// tanh through one exponential: libm's tanh is several times slower (and a
// call, which keeps the loop scalar); GELU is the largest element-wise cost
// of the block.
template <typename T>
inline T fast_tanh(T u) {
  T e = exp_poly(T(-2) * std::abs(u));
  T r = (T(1) - e) / (T(1) + e);
  return u < 0 ? -r : r;
}

// GPT-2's tanh approximation.
template <typename T>
void gelu_forward(const T* x, T* y, long n) {
  const T c = T(0.7978845608028654), k = T(0.044715);
  for (long i = 0; i < n; ++i) {
    T v = x[i];
    y[i] = T(0.5) * v * (T(1) + fast_tanh(c * (v + k * v * v * v)));
  }
}

template <typename T>
void gelu_backward(const T* x, const T* dy, T* dx, long n) {
  const T c = T(0.7978845608028654), k = T(0.044715);
  for (long i = 0; i < n; ++i) {
    T v = x[i];
    T th = fast_tanh(c * (v + k * v * v * v));
    T dth = (T(1) - th * th) * c * (T(1) + T(3) * k * v * v);
    dx[i] = dy[i] * (T(0.5) * (T(1) + th) + T(0.5) * v * dth);
  }
}

// The embedding with the vocabulary split over Y: this rank holds rows
// [v0, v0 + vy) of E (row stride ldE) and hx of its columns. `tokens` holds
// sequences of S + 1 (inputs, then the shifted targets): token i of the t is
// tokens[(i / S)·(S + 1) + i % S]. A row outside this block contributes zero
// (the lookup is all-reduced over Y); positions [S, hx] are added after.
inline long embedding_row(const int* tokens, long i, long S, long v0) { return tokens[(i / S) * (S + 1) + i % S] - v0; }

template <typename T>
void embedding_lookup(const int* tokens, const T* E, long ldE, T* h0, long t, long S, long hx, long vy, long v0) {
  for (long i = 0; i < t; ++i) {
    const long r = embedding_row(tokens, i, S, v0);
    for (long j = 0; j < hx; ++j) h0[i * hx + j] = (r >= 0 && r < vy) ? E[r * ldE + j] : T(0);
  }
}

template <typename T>
void add_positions(T* h0, const T* pos, long t, long S, long hx) {
  for (long i = 0; i < t; ++i)
    for (long j = 0; j < hx; ++j) h0[i * hx + j] += pos[(i % S) * hx + j];
}

// Backward: each token's gradient row added into its row of dE (where this
// block holds it) and into its position's row of dpos, tokens in order.
template <typename T>
void embedding_scatter_add(const int* tokens, const T* dh0, T* dE, long ldE, T* dpos, long t, long S, long hx, long vy,
                           long v0) {
  for (long i = 0; i < t; ++i) {
    const long r = embedding_row(tokens, i, S, v0);
    if (r < 0 || r >= vy) continue;
    for (long j = 0; j < hx; ++j) dE[r * ldE + j] += dh0[i * hx + j];
  }
  for (long i = 0; i < t; ++i)
    for (long j = 0; j < hx; ++j) dpos[(i % S) * hx + j] += dh0[i * hx + j];
}

// Causal attention over `seqs` sequences of S tokens and `heads` local
// heads of size dh. qkv is [seqs·S, 3·heads·dh] with this rank's Q, K, V
// heads in order; out is [seqs·S, heads·dh]; probs keeps softmax(QKᵀ) per
// (sequence, head) for backward. One kernel (fused, as on a GPU); returns
// the seconds its GEMMs spent in BLAS.
template <typename T>
double attention_forward(Device& dev, const T* qkv, T* out, T* probs, long seqs, long S, long heads, long dh) {
  const long hy = heads * dh, ld = 3 * hy;
  const T scale = T(1) / std::sqrt(T(dh));
  double blas_s = 0;
  for (long s = 0; s < seqs; ++s)
    for (long h = 0; h < heads; ++h) {
      const T* q = qkv + s * S * ld + h * dh;
      const T* k = q + hy;
      const T* v = q + 2 * hy;
      T* P = probs + (s * heads + h) * S * S;
      blas_s += host_gemm<T>(dev, false, true, int(S), int(S), int(dh), scale, q, int(ld), k, int(ld), T(0), P, int(S));
      for (long i = 0; i < S; ++i) {  // causal softmax of row i over keys 0..i
        T* row = P + i * S;
        const size_t n = size_t(i) + 1;
        const T mx = max_lanes(row, n);
        for (size_t j = 0; j < n; ++j) row[j] = exp_poly(row[j] - mx);
        const T sum = sum_lanes<T>(n, [row](size_t j) { return row[j]; });
        for (size_t j = 0; j < n; ++j) row[j] /= sum;
        std::fill(row + n, row + S, T(0));
      }
      blas_s += host_gemm<T>(dev, false, false, int(S), int(dh), int(S), T(1), P, int(S), v, int(ld), T(0),
                             out + s * S * hy + h * dh, int(hy));
    }
  return blas_s;
}

template <typename T>
double attention_backward(Device& dev, const T* qkv, const T* probs, const T* dout, T* dqkv, long seqs, long S,
                          long heads, long dh) {
  const long hy = heads * dh, ld = 3 * hy;
  const T scale = T(1) / std::sqrt(T(dh));
  std::vector<T> dP(S * S);
  double blas_s = 0;
  for (long s = 0; s < seqs; ++s)
    for (long h = 0; h < heads; ++h) {
      const T* q = qkv + s * S * ld + h * dh;
      const T* k = q + hy;
      const T* v = q + 2 * hy;
      T* dq = dqkv + s * S * ld + h * dh;
      T* dk = dq + hy;
      T* dv = dq + 2 * hy;
      const T* P = probs + (s * heads + h) * S * S;
      const T* dO = dout + s * S * hy + h * dh;
      blas_s += host_gemm<T>(dev, false, true, int(S), int(S), int(dh), T(1), dO, int(hy), v, int(ld), T(0), dP.data(),
                             int(S));
      blas_s += host_gemm<T>(dev, true, false, int(S), int(dh), int(S), T(1), P, int(S), dO, int(hy), T(0), dv, int(ld));
      for (long i = 0; i < S; ++i) {  // softmax backward, scaled: dScores = P∘(dP − Σ dP∘P)·scale
        T* d = dP.data() + i * S;
        const T* p = P + i * S;
        const size_t n = size_t(i) + 1;
        const T dot = sum_lanes<T>(n, [d, p](size_t j) { return d[j] * p[j]; });
        for (size_t j = 0; j < n; ++j) d[j] = p[j] * (d[j] - dot) * scale;
        std::fill(d + n, d + S, T(0));
      }
      blas_s += host_gemm<T>(dev, false, false, int(S), int(dh), int(S), T(1), dP.data(), int(S), k, int(ld), T(0), dq,
                             int(ld));
      blas_s += host_gemm<T>(dev, true, false, int(S), int(dh), int(S), T(1), dP.data(), int(S), q, int(ld), T(0), dk,
                             int(ld));
    }
  return blas_s;
}

// Cross-entropy with the vocabulary split over Y: this rank holds logits
// [t, vy] for vocabulary [v0, v0 + vy); entries ≥ `vocab` are padding (−∞).
// Three local steps around two reductions over Y: the max (t), then the sum
// of exponentials and the target logit (2t). No collective in backward.
inline long vocab_valid(long vy, long v0, long vocab) { return std::clamp(vocab - v0, 0L, vy); }

template <typename T>
void cross_entropy_row_max(const T* logits, T* mx, long t, long vy, long valid) {
  for (long i = 0; i < t; ++i)
    mx[i] = valid > 0 ? max_lanes(logits + i * vy, size_t(valid)) : -std::numeric_limits<T>::infinity();
}

// e = exp(logit − max) once, kept in dlogits until the sums arrive; st[2i]
// the sum of this rank's e, st[2i+1] the target's logit where this rank has it.
template <typename T>
void cross_entropy_exp_sums(const T* logits, const int* targets, const T* mx, T* dlogits, T* st, long t, long vy,
                            long v0, long valid) {
  for (long i = 0; i < t; ++i) {
    const T* l = logits + i * vy;
    T* e = dlogits + i * vy;
    const T m = mx[i];
    for (long j = 0; j < valid; ++j) e[j] = exp_poly(l[j] - m);
    st[2 * i] = sum_lanes<T>(size_t(valid), [e](size_t j) { return e[j]; });
    long tj = targets[i] - v0;
    st[2 * i + 1] = (tj >= 0 && tj < vy) ? l[tj] : T(0);
  }
}

// Returns Σ of the token losses; writes dlogits = (softmax − onehot)·grad_scale.
template <typename T>
double cross_entropy_finish(const int* targets, const T* mx, const T* st, T* dlogits, long t, long vy, long v0,
                            long valid, T grad_scale) {
  double loss = 0;
  for (long i = 0; i < t; ++i) {
    const T sum = st[2 * i];
    loss += double(std::log(sum) + mx[i] - st[2 * i + 1]);
    T* d = dlogits + i * vy;
    const long tj = targets[i] - v0;
    const bool here = tj >= 0 && tj < valid;
    const T e_target = here ? d[tj] : T(0);
    for (long j = 0; j < valid; ++j) d[j] = d[j] / sum * grad_scale;
    std::fill(d + valid, d + vy, T(0));
    if (here) d[tj] = (e_target / sum - T(1)) * grad_scale;
  }
  return loss;
}

}  // namespace ff::engine
