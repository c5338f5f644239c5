#pragma once
// The non-GEMM layers of the block on one rank's slice, with the reductions
// MODEL.md §1 prescribes for them: LayerNorm over a hidden dimension split over
// X, GELU, causal attention on whole heads, vocabulary-parallel cross-entropy
// over Y. Plain loops; activations are row-major [tokens, columns].
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "grid_comm.hpp"
#include "matmul.hpp"

namespace ff::engine {

constexpr double kLayerNormEps = 1e-5;

// y = (x − mean)·rstd·γ + β over the full hidden size H, of which this rank
// holds `hx` columns. Two reductions over X: the sum, then the centred sum of
// squares (E[x²] − mean² cancels in fp32).
template <typename T>
void layernorm_forward(GridComm& comm, const T* x, const T* gamma, const T* beta, T* y, T* xhat, T* rstd, long t,
                       long hx, long H) {
  std::vector<T> stat(t);
  for (long i = 0; i < t; ++i) {
    T s = 0;
    for (long j = 0; j < hx; ++j) s += x[i * hx + j];
    stat[i] = s;
  }
  comm.all_reduce(Axis::X, stat.data(), t);
  std::vector<T> mean(t);
  for (long i = 0; i < t; ++i) {
    mean[i] = stat[i] / T(H);
    T s = 0;
    for (long j = 0; j < hx; ++j) {
      T d = x[i * hx + j] - mean[i];
      s += d * d;
    }
    stat[i] = s;
  }
  comm.all_reduce(Axis::X, stat.data(), t);
  for (long i = 0; i < t; ++i) {
    rstd[i] = T(1) / std::sqrt(stat[i] / T(H) + T(kLayerNormEps));
    for (long j = 0; j < hx; ++j) {
      T xh = (x[i * hx + j] - mean[i]) * rstd[i];
      xhat[i * hx + j] = xh;
      y[i * hx + j] = xh * gamma[j] + beta[j];
    }
  }
}

// dx = rstd·(g − mean(g) − x̂·mean(g·x̂)), g = dy·γ; one reduction of 2t
// over X. dγ, dβ accumulate.
template <typename T>
void layernorm_backward(GridComm& comm, const T* dy, const T* xhat, const T* rstd, const T* gamma, T* dx,
                        T* dgamma, T* dbeta, long t, long hx, long H) {
  std::vector<T> stat(2 * t);
  for (long i = 0; i < t; ++i) {
    T a = 0, b = 0;
    for (long j = 0; j < hx; ++j) {
      T g = dy[i * hx + j] * gamma[j];
      a += g;
      b += g * xhat[i * hx + j];
    }
    stat[2 * i] = a, stat[2 * i + 1] = b;
  }
  comm.all_reduce(Axis::X, stat.data(), 2 * t);
  for (long i = 0; i < t; ++i) {
    T ma = stat[2 * i] / T(H), mb = stat[2 * i + 1] / T(H);
    for (long j = 0; j < hx; ++j) {
      T xh = xhat[i * hx + j], d = dy[i * hx + j];
      dx[i * hx + j] = rstd[i] * (d * gamma[j] - ma - xh * mb);
      dgamma[j] += d * xh;
      dbeta[j] += d;
    }
  }
}

// tanh through one exponential: libm's tanh is several times slower, and
// GELU is the largest element-wise cost of the block.
template <typename T>
inline T fast_tanh(T u) {
  T e = std::exp(T(-2) * std::abs(u));
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

// Causal attention over `seqs` sequences of S tokens and `heads` local
// heads of size dh. qkv is [seqs·S, 3·heads·dh] with this rank's Q, K, V
// heads in order; out is [seqs·S, heads·dh]; probs keeps softmax(QKᵀ) per
// (sequence, head) for backward.
template <typename T>
void attention_forward(GemmStats& st, GridComm* comm, const T* qkv, T* out, T* probs, long seqs, long S, long heads,
                       long dh) {
  const long hy = heads * dh, ld = 3 * hy;
  const T scale = T(1) / std::sqrt(T(dh));
  for (long s = 0; s < seqs; ++s)
    for (long h = 0; h < heads; ++h) {
      const T* q = qkv + s * S * ld + h * dh;
      const T* k = q + hy;
      const T* v = q + 2 * hy;
      T* P = probs + (s * heads + h) * S * S;
      gemm<T>(st, comm, false, true, int(S), int(S), int(dh), scale, q, int(ld), k, int(ld), T(0), P, int(S));
      for (long i = 0; i < S; ++i) {
        T* row = P + i * S;
        T mx = row[0];
        for (long j = 1; j <= i; ++j) mx = std::max(mx, row[j]);
        T sum = 0;
        for (long j = 0; j <= i; ++j) sum += (row[j] = std::exp(row[j] - mx));
        for (long j = 0; j <= i; ++j) row[j] /= sum;
        for (long j = i + 1; j < S; ++j) row[j] = 0;
      }
      gemm<T>(st, comm, false, false, int(S), int(dh), int(S), T(1), P, int(S), v, int(ld), T(0),
              out + s * S * hy + h * dh, int(hy));
    }
}

template <typename T>
void attention_backward(GemmStats& st, GridComm* comm, const T* qkv, const T* probs, const T* dout, T* dqkv,
                        long seqs, long S, long heads, long dh) {
  const long hy = heads * dh, ld = 3 * hy;
  const T scale = T(1) / std::sqrt(T(dh));
  std::vector<T> dP(S * S);
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
      gemm<T>(st, comm, false, true, int(S), int(S), int(dh), T(1), dO, int(hy), v, int(ld), T(0), dP.data(), int(S));
      gemm<T>(st, comm, true, false, int(S), int(dh), int(S), T(1), P, int(S), dO, int(hy), T(0), dv, int(ld));
      for (long i = 0; i < S; ++i) {  // softmax backward, scaled: dScores = P∘(dP − Σ dP∘P)·scale
        T dot = 0;
        for (long j = 0; j <= i; ++j) dot += dP[i * S + j] * P[i * S + j];
        for (long j = 0; j < S; ++j) dP[i * S + j] = j <= i ? P[i * S + j] * (dP[i * S + j] - dot) * scale : T(0);
      }
      gemm<T>(st, comm, false, false, int(S), int(dh), int(S), T(1), dP.data(), int(S), k, int(ld), T(0), dq, int(ld));
      gemm<T>(st, comm, true, false, int(S), int(dh), int(S), T(1), dP.data(), int(S), q, int(ld), T(0), dk, int(ld));
    }
}

// Cross-entropy with the vocabulary split over Y: this rank holds logits
// [t, vy] for vocabulary [v0, v0 + vy); entries ≥ `vocab` are padding (−∞).
// Reductions over Y: the max (t), then sum of exponentials and target logit
// (2t). Returns Σ of this rank's token losses; writes dlogits = (softmax −
// onehot)·grad_scale. No collective in backward.
template <typename T>
double cross_entropy(GridComm& comm, const T* logits, const int* targets, T* dlogits, long t, long vy, long v0,
                     long vocab, T grad_scale) {
  const long valid = std::clamp(vocab - v0, 0L, vy);
  std::vector<T> mx(t, -std::numeric_limits<T>::infinity());
  for (long i = 0; i < t; ++i)
    for (long j = 0; j < valid; ++j) mx[i] = std::max(mx[i], logits[i * vy + j]);
  comm.all_reduce(Axis::Y, mx.data(), t, MPI_MAX);
  std::vector<T> st(2 * t);
  for (long i = 0; i < t; ++i) {
    T s = 0;
    for (long j = 0; j < valid; ++j) s += std::exp(logits[i * vy + j] - mx[i]);
    long tj = targets[i] - v0;
    st[2 * i] = s;
    st[2 * i + 1] = (tj >= 0 && tj < vy) ? logits[i * vy + tj] : T(0);
  }
  comm.all_reduce(Axis::Y, st.data(), 2 * t);
  double loss = 0;
  for (long i = 0; i < t; ++i) {
    T sum = st[2 * i];
    loss += double(std::log(sum) + mx[i] - st[2 * i + 1]);
    long tj = targets[i] - v0;
    for (long j = 0; j < vy; ++j) {
      T p = j < valid ? std::exp(logits[i * vy + j] - mx[i]) / sum : T(0);
      dlogits[i * vy + j] = (p - (j == tj ? T(1) : T(0))) * grad_scale;
    }
  }
  return loss;
}

}  // namespace ff::engine
