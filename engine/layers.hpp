#pragma once
// The non-GEMM layers of the block on one rank's slice, as pure functions of
// buffers and shapes: LayerNorm over a hidden dimension split over X, GELU,
// causal attention on whole heads, vocabulary-parallel cross-entropy over Y.
// A layer whose math needs a reduction (MODEL.md §1) is split into the local
// steps around it; the schedule (gpt.cpp) launches each step as a kernel and
// issues the reduction between them. Plain loops; activations are row-major
// [tokens, columns]. Each loop is written to vectorize: exp_poly instead of
// libm's exp, sums over rows in lanes (vecmath.hpp). T is the training dtype
// and M = master_t<T> the type each kernel computes in and keeps statistics
// and gradient accumulators in (float for bf16, T otherwise); a T output is
// rounded once, when it is stored.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "engine/device.hpp"
#include "engine/matmul.hpp"
#include "engine/runtime/bf16.hpp"
#include "engine/vecmath.hpp"

namespace ff::engine {

constexpr double kLayerNormEps = 1e-5;

// LayerNorm over the full hidden size H, of which this rank holds `hx`
// columns, in the three local steps around its two reductions over X: the
// sum, then the centred sum of squares (E[x²] − mean² cancels in fp32).
// y = (x − mean)·rstd·γ + β.
template <typename T>
void layernorm_row_sums(const T* x, master_t<T>* sum, long t, long hx) {
  using M = master_t<T>;
  for (long i = 0; i < t; ++i) {
    const T* xr = x + i * hx;
    sum[i] = sum_lanes<M>(size_t(hx), [xr](size_t j) { return M(xr[j]); });
  }
}

// sum (reduced over X) → mean; writes the centred sums of squares to `sq`.
template <typename T>
void layernorm_centred_squares(const T* x, const master_t<T>* sum, master_t<T>* mean, master_t<T>* sq, long t, long hx,
                               long H) {
  using M = master_t<T>;
  for (long i = 0; i < t; ++i) {
    const T* xr = x + i * hx;
    const M m = mean[i] = sum[i] / M(H);
    sq[i] = sum_lanes<M>(size_t(hx), [xr, m](size_t j) { return (M(xr[j]) - m) * (M(xr[j]) - m); });
  }
}

// sq (reduced over X) → rstd; writes x̂ and y.
template <typename T>
void layernorm_normalize(const T* x, const master_t<T>* mean, const master_t<T>* sq, const T* gamma, const T* beta,
                         T* y, T* xhat, master_t<T>* rstd, long t, long hx, long H) {
  using M = master_t<T>;
  for (long i = 0; i < t; ++i) {
    const M r = rstd[i] = M(1) / std::sqrt(sq[i] / M(H) + M(kLayerNormEps)), m = mean[i];
    const T* xr = x + i * hx;
    T* xh = xhat + i * hx;
    T* yr = y + i * hx;
    for (long j = 0; j < hx; ++j) {
      const M v = (M(xr[j]) - m) * r;
      xh[j] = T(v);
      yr[j] = T(v * M(gamma[j]) + M(beta[j]));
    }
  }
}

// Backward: dx = rstd·(g − mean(g) − x̂·mean(g·x̂)), g = dy·γ; the two sums
// per token (2t values) are reduced over X between the steps.
template <typename T>
void layernorm_backward_sums(const T* dy, const T* xhat, const T* gamma, master_t<T>* stat, long t, long hx) {
  using M = master_t<T>;
  for (long i = 0; i < t; ++i) {
    const T* d = dy + i * hx;
    const T* xh = xhat + i * hx;
    stat[2 * i] = sum_lanes<M>(size_t(hx), [d, gamma](size_t j) { return M(d[j]) * M(gamma[j]); });
    stat[2 * i + 1] =
        sum_lanes<M>(size_t(hx), [d, gamma, xh](size_t j) { return M(d[j]) * M(gamma[j]) * M(xh[j]); });
  }
}

// dγ, dβ accumulate.
template <typename T>
void layernorm_backward_apply(const T* dy, const T* xhat, const master_t<T>* rstd, const T* gamma,
                              const master_t<T>* stat, T* dx, master_t<T>* dgamma, master_t<T>* dbeta, long t, long hx,
                              long H) {
  using M = master_t<T>;
  for (long i = 0; i < t; ++i) {
    const M ma = stat[2 * i] / M(H), mb = stat[2 * i + 1] / M(H), r = rstd[i];
    const T* d = dy + i * hx;
    const T* xh = xhat + i * hx;
    T* dxr = dx + i * hx;
    // Two loops: one with all three outputs needs more runtime alias checks
    // than GCC versions a loop for, and stays scalar.
    for (long j = 0; j < hx; ++j) dxr[j] = T(r * (M(d[j]) * M(gamma[j]) - ma - M(xh[j]) * mb));
    for (long j = 0; j < hx; ++j) {
      dgamma[j] += M(d[j]) * M(xh[j]);
      dbeta[j] += M(d[j]);
    }
  }
}

// LayerNorm on whole rows (hx = H: no reduction over X between the steps),
// one row at a time through the steps above: the split sequence's results
// bit for bit, without its per-token statistics arrays.
template <typename T>
void layernorm_forward(const T* x, const T* gamma, const T* beta, T* y, T* xhat, master_t<T>* rstd, long t, long H) {
  using M = master_t<T>;
  for (long i = 0; i < t; ++i) {
    M sum, mean, sq;
    const long at = i * H;
    layernorm_row_sums(x + at, &sum, 1, H);
    layernorm_centred_squares(x + at, &sum, &mean, &sq, 1, H, H);
    layernorm_normalize(x + at, &mean, &sq, gamma, beta, y + at, xhat + at, rstd + i, 1, H, H);
  }
}

// dγ, dβ accumulate row by row, in the split sequence's order.
template <typename T>
void layernorm_backward(const T* dy, const T* xhat, const master_t<T>* rstd, const T* gamma, T* dx,
                        master_t<T>* dgamma, master_t<T>* dbeta, long t, long H) {
  using M = master_t<T>;
  for (long i = 0; i < t; ++i) {
    M stat[2];
    const long at = i * H;
    layernorm_backward_sums(dy + at, xhat + at, gamma, stat, 1, H);
    layernorm_backward_apply(dy + at, xhat + at, rstd + i, gamma, stat, dx + at, dgamma, dbeta, 1, H, H);
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
  using M = master_t<T>;
  const M c = M(0.7978845608028654), k = M(0.044715);
  for (long i = 0; i < n; ++i) {
    M v = M(x[i]);
    y[i] = T(M(0.5) * v * (M(1) + fast_tanh(c * (v + k * v * v * v))));
  }
}

template <typename T>
void gelu_backward(const T* x, const T* dy, T* dx, long n) {
  using M = master_t<T>;
  const M c = M(0.7978845608028654), k = M(0.044715);
  for (long i = 0; i < n; ++i) {
    M v = M(x[i]);
    M th = fast_tanh(c * (v + k * v * v * v));
    M dth = (M(1) - th * th) * c * (M(1) + M(3) * k * v * v);
    dx[i] = T(M(dy[i]) * (M(0.5) * (M(1) + th) + M(0.5) * v * dth));
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
  using M = master_t<T>;
  for (long i = 0; i < t; ++i)
    for (long j = 0; j < hx; ++j) h0[i * hx + j] = T(M(h0[i * hx + j]) + M(pos[(i % S) * hx + j]));
}

// Backward: each token's gradient row added into its row of dE (where this
// block holds it) and into its position's row of dpos (where there is one),
// tokens in order.
template <typename T>
void embedding_scatter_add(const int* tokens, const T* dh0, master_t<T>* dE, long ldE, master_t<T>* dpos, long t,
                           long S, long hx, long vy, long v0) {
  using M = master_t<T>;
  for (long i = 0; i < t; ++i) {
    const long r = embedding_row(tokens, i, S, v0);
    if (r < 0 || r >= vy) continue;
    for (long j = 0; j < hx; ++j) dE[r * ldE + j] += M(dh0[i * hx + j]);
  }
  if (!dpos) return;  // rotary positions: no table
  for (long i = 0; i < t; ++i)
    for (long j = 0; j < hx; ++j) dpos[(i % S) * hx + j] += M(dh0[i * hx + j]);
}

// A rank's QKV row: its Q heads, then its K heads, then its V heads; query
// head h reads KV head h / (heads / kv).
struct HeadLayout {
  long heads, kv, dh;
  long hy() const { return heads * dh; }
  long ld() const { return (heads + 2 * kv) * dh; }
  long group() const { return heads / kv; }
  long q(long h) const { return h * dh; }
  long k(long h) const { return hy() + (h / group()) * dh; }
  long v(long h) const { return hy() + (kv + h / group()) * dh; }
};

// Causal attention over `seqs` sequences of S tokens and `heads` local query
// heads of size dh over `kv` local key/value heads (grouped-query attention:
// query head h reads KV head h / (heads / kv); kv = heads is multi-head
// attention). qkv is [seqs·S, (heads + 2·kv)·dh]: this rank's Q heads, then
// its K heads, then its V heads; out is [seqs·S, heads·dh]; probs keeps
// softmax(QKᵀ) per (sequence, query head) for backward, in T. The scores and
// their softmax are computed in M (for bf16, scores rounded before the
// softmax would move the probabilities by percents); P·V reads the
// probabilities as kept. One kernel (fused, as on a GPU); returns the seconds
// its GEMMs spent in BLAS.
template <typename T>
double attention_forward(Device& dev, const T* qkv, T* out, T* probs, long seqs, long S, long heads, long kv, long dh) {
  using M = master_t<T>;
  const HeadLayout hl{heads, kv, dh};
  const long hy = hl.hy(), ld = hl.ld();
  const M scale = M(1) / std::sqrt(M(dh));
  std::vector<M> scores(std::is_same_v<T, M> ? 0 : size_t(S * S));
  double blas_s = 0;
  for (long s = 0; s < seqs; ++s)
    for (long h = 0; h < heads; ++h) {
      const T* base = qkv + s * S * ld;
      const T* q = base + hl.q(h);
      const T* k = base + hl.k(h);
      const T* v = base + hl.v(h);
      T* P = probs + (s * heads + h) * S * S;
      M* Pm = nullptr;
      if constexpr (std::is_same_v<T, M>) Pm = P;
      else Pm = scores.data();
      blas_s += host_gemm(dev, false, true, int(S), int(S), int(dh), scale, q, int(ld), k, int(ld), M(0), Pm, int(S));
      for (long i = 0; i < S; ++i) {  // causal softmax of row i over keys 0..i
        M* row = Pm + i * S;
        const size_t n = size_t(i) + 1;
        const M mx = max_lanes(row, n);
        for (size_t j = 0; j < n; ++j) row[j] = exp_poly(row[j] - mx);
        const M sum = sum_lanes<M>(n, [row](size_t j) { return row[j]; });
        for (size_t j = 0; j < n; ++j) row[j] /= sum;
        std::fill(row + n, row + S, M(0));
      }
      if constexpr (!std::is_same_v<T, M>)
        for (long j = 0; j < S * S; ++j) P[j] = T(Pm[j]);
      blas_s += host_gemm(dev, false, false, int(S), int(dh), int(S), M(1), static_cast<const T*>(P), int(S), v,
                          int(ld), M(0), out + s * S * hy + h * dh, int(hy));
    }
  return blas_s;
}

// Backward: dP = dO·Vᵀ and the softmax's backward in M, its result rounded
// to T for the two products that read it. A KV head's dK and dV are the sums
// over its query heads, added in head order (β = 1 after the group's first).
template <typename T>
double attention_backward(Device& dev, const T* qkv, const T* probs, const T* dout, T* dqkv, long seqs, long S,
                          long heads, long kv, long dh) {
  using M = master_t<T>;
  const HeadLayout hl{heads, kv, dh};
  const long hy = hl.hy(), ld = hl.ld();
  const M scale = M(1) / std::sqrt(M(dh));
  std::vector<M> dP(S * S);
  std::vector<T> dS(std::is_same_v<T, M> ? 0 : size_t(S * S));
  double blas_s = 0;
  for (long s = 0; s < seqs; ++s)
    for (long h = 0; h < heads; ++h) {
      const T* base = qkv + s * S * ld;
      const T* q = base + hl.q(h);
      const T* k = base + hl.k(h);
      const T* v = base + hl.v(h);
      T* dbase = dqkv + s * S * ld;
      T* dq = dbase + hl.q(h);
      T* dk = dbase + hl.k(h);
      T* dv = dbase + hl.v(h);
      const M kv_beta = h % hl.group() == 0 ? M(0) : M(1);
      const T* P = probs + (s * heads + h) * S * S;
      const T* dO = dout + s * S * hy + h * dh;
      blas_s += host_gemm(dev, false, true, int(S), int(S), int(dh), M(1), dO, int(hy), v, int(ld), M(0), dP.data(),
                          int(S));
      blas_s += host_gemm(dev, true, false, int(S), int(dh), int(S), M(1), P, int(S), dO, int(hy), kv_beta, dv, int(ld));
      for (long i = 0; i < S; ++i) {  // softmax backward, scaled: dScores = P∘(dP − Σ dP∘P)·scale
        M* d = dP.data() + i * S;
        const T* p = P + i * S;
        const size_t n = size_t(i) + 1;
        const M dot = sum_lanes<M>(n, [d, p](size_t j) { return d[j] * M(p[j]); });
        for (size_t j = 0; j < n; ++j) d[j] = M(p[j]) * (d[j] - dot) * scale;
        std::fill(d + n, d + S, M(0));
      }
      const T* dSp = nullptr;
      if constexpr (std::is_same_v<T, M>) {
        dSp = dP.data();
      } else {
        for (long j = 0; j < S * S; ++j) dS[size_t(j)] = T(dP[size_t(j)]);
        dSp = dS.data();
      }
      blas_s += host_gemm(dev, false, false, int(S), int(dh), int(S), M(1), dSp, int(S), k, int(ld), M(0), dq, int(ld));
      blas_s += host_gemm(dev, true, false, int(S), int(dh), int(S), M(1), dSp, int(S), q, int(ld), kv_beta, dk, int(ld));
    }
  return blas_s;
}

// Cross-entropy with the vocabulary split over Y: this rank holds logits
// [t, vy] for vocabulary [v0, v0 + vy); entries ≥ `vocab` are padding (−∞).
// Three local steps around two reductions over Y: the max (t), then the sum
// of exponentials and the target logit (2t). No collective in backward.
inline long vocab_valid(long vy, long v0, long vocab) { return std::clamp(vocab - v0, 0L, vy); }

template <typename T>
void cross_entropy_row_max(const T* logits, master_t<T>* mx, long t, long vy, long valid) {
  using M = master_t<T>;
  for (long i = 0; i < t; ++i) {
    const T* l = logits + i * vy;
    M m = -std::numeric_limits<M>::infinity();
    if constexpr (std::is_same_v<T, M>) {
      if (valid > 0) m = max_lanes(l, size_t(valid));
    } else {
      for (long j = 0; j < valid; ++j) m = std::max(m, M(l[j]));
    }
    mx[i] = m;
  }
}

// e = exp(logit − max) once, kept in dlogits until the sums arrive; st[2i]
// the sum of this rank's e (before it is rounded to T), st[2i+1] the
// target's logit where this rank has it.
template <typename T>
void cross_entropy_exp_sums(const T* logits, const int* targets, const master_t<T>* mx, T* dlogits, master_t<T>* st,
                            long t, long vy, long v0, long valid) {
  using M = master_t<T>;
  for (long i = 0; i < t; ++i) {
    const T* l = logits + i * vy;
    T* e = dlogits + i * vy;
    const M m = mx[i];
    if constexpr (std::is_same_v<T, M>) {
      for (long j = 0; j < valid; ++j) e[j] = exp_poly(l[j] - m);
      st[2 * i] = sum_lanes<M>(size_t(valid), [e](size_t j) { return e[j]; });
    } else {
      st[2 * i] = sum_lanes<M>(size_t(valid), [l, e, m](size_t j) {  // each j once: one exponential per logit
        const M ej = exp_poly(M(l[j]) - m);
        e[j] = T(ej);
        return ej;
      });
    }
    long tj = targets[i] - v0;
    st[2 * i + 1] = (tj >= 0 && tj < vy) ? M(l[tj]) : M(0);
  }
}

// Returns Σ of the token losses; writes dlogits = (softmax − onehot)·grad_scale.
template <typename T>
double cross_entropy_finish(const int* targets, const master_t<T>* mx, const master_t<T>* st, T* dlogits, long t,
                            long vy, long v0, long valid, master_t<T> grad_scale) {
  using M = master_t<T>;
  double loss = 0;
  for (long i = 0; i < t; ++i) {
    const M sum = st[2 * i];
    loss += double(std::log(sum) + mx[i] - st[2 * i + 1]);
    T* d = dlogits + i * vy;
    const long tj = targets[i] - v0;
    const bool here = tj >= 0 && tj < valid;
    const M e_target = here ? M(d[tj]) : M(0);
    for (long j = 0; j < valid; ++j) d[j] = T(M(d[j]) / sum * grad_scale);
    std::fill(d + valid, d + vy, T(0));
    if (here) d[tj] = T((e_target / sum - M(1)) * grad_scale);
  }
  return loss;
}

}  // namespace ff::engine
