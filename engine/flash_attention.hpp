#pragma once
// Causal attention in tiles with an online softmax (FlashAttention's
// algorithm), the cpu twin of the GPU's (cuda/flash_attention.cu): the same
// 64×64 tiles visited in the same order, the same values rounded to T, so
// the fp64 exactness suite checks the algorithm the GPU runs. Nothing S×S is
// kept: forward writes the output and each query row's log-sum-exp (lse,
// [seqs, heads, S] in M); backward recomputes the probabilities from it.
// Tiles above the diagonal are never visited. Layouts are layers.hpp's
// (HeadLayout): qkv [seqs·S, (heads + 2·kv)·dh], out [seqs·S, heads·dh].
//
// Backward runs as the GPU's two passes without atomics (reproducible):
// per KV head and key tile, dK and dV summed over the group's query heads
// and the query tiles at and below the diagonal; then per query head and
// query tile, dQ over the key tiles up to the diagonal. That recomputes
// QKᵀ and dO·Vᵀ in the second pass: 7 tile products against forward's 2
// (FlashAttention's atomic dQ does 5).
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "engine/device.hpp"
#include "engine/layers.hpp"
#include "engine/matmul.hpp"
#include "engine/runtime/bf16.hpp"
#include "engine/vecmath.hpp"

namespace ff::engine {

constexpr long kFlashTile = 64;

namespace flash {

// One sequence's view of the heads: a tile's rows start at row i0.
template <typename T>
struct Heads {
  const T* base;  // the sequence's first qkv row
  HeadLayout hl;
  long ld() const { return hl.ld(); }
  const T* q(long h, long i0) const { return base + i0 * ld() + hl.q(h); }
  const T* k(long h, long j0) const { return base + j0 * ld() + hl.k(h); }
  const T* v(long h, long j0) const { return base + j0 * ld() + hl.v(h); }
};

// Keys at and before query row a of a tile starting at i0, in the key tile
// starting at j0 of c keys: the causal mask.
inline long visible(long i0, long a, long j0, long c) { return std::clamp(i0 + a - j0 + 1, 0L, c); }

// P (and T-rounded P) of an r×c tile from its scaled scores and the rows'
// lse: exp(s − lse) where visible, 0 above the diagonal.
template <typename T, typename M>
void probabilities(const M* s, const M* lse, long i0, long j0, long r, long c, M* p, T* pt) {
  for (long a = 0; a < r; ++a) {
    const long n = visible(i0, a, j0, c);
    for (long b = 0; b < c; ++b) {
      p[a * c + b] = b < n ? exp_poly(s[a * c + b] - lse[a]) : M(0);
      pt[a * c + b] = T(p[a * c + b]);
    }
  }
}

// dS = P∘(dP − δ)·scale in place over dP, and rounded to T.
template <typename T, typename M>
void score_grads(const M* p, M* dp, const M* delta, M scale, long r, long c, T* dst) {
  for (long a = 0; a < r; ++a)
    for (long b = 0; b < c; ++b) {
      dp[a * c + b] = p[a * c + b] * (dp[a * c + b] - delta[a]) * scale;
      dst[a * c + b] = T(dp[a * c + b]);
    }
}

}  // namespace flash

// Forward: per (sequence, query head, query tile) a running max m, sum l
// and output in M; each key tile rescales them by exp(m_old − m_new). The
// sums are of the unrounded exponentials, the product with V reads them
// rounded to T (a GPU's tensor cores take bf16 operands). Returns the host's
// seconds in BLAS.
template <typename T>
double flash_attention_forward(Device& dev, const T* qkv, T* out, master_t<T>* lse, long seqs, long S, long heads,
                               long kv, long dh) {
  using M = master_t<T>;
  const HeadLayout hl{heads, kv, dh};
  const long hy = hl.hy(), B = kFlashTile;
  const M scale = M(1) / std::sqrt(M(dh));
  std::vector<M> s(B * B), acc(B * dh), m(B), l(B);
  std::vector<T> pt(B * B);
  double blas_s = 0;
  for (long q = 0; q < seqs; ++q) {
    const flash::Heads<T> x{qkv + q * S * hl.ld(), hl};
    for (long h = 0; h < heads; ++h)
      for (long i0 = 0; i0 < S; i0 += B) {
        const long r = std::min(B, S - i0);
        std::fill(acc.begin(), acc.end(), M(0));
        std::fill(m.begin(), m.end(), -std::numeric_limits<M>::infinity());
        std::fill(l.begin(), l.end(), M(0));
        for (long j0 = 0; j0 <= i0; j0 += B) {
          const long c = std::min(B, S - j0);
          blas_s += host_gemm(dev, false, true, int(r), int(c), int(dh), scale, x.q(h, i0), int(x.ld()), x.k(h, j0),
                              int(x.ld()), M(0), s.data(), int(c));
          for (long a = 0; a < r; ++a) {
            const long n = flash::visible(i0, a, j0, c);
            M* row = s.data() + a * c;
            const M m_new = std::max(m[a], max_lanes(row, size_t(n)));
            const M rescale = std::exp(m[a] - m_new);  // 0 at the first tile (m = −∞)
            M sum = 0;
            for (long b = 0; b < c; ++b) {
              const M p = b < n ? exp_poly(row[b] - m_new) : M(0);
              sum += p;
              pt[a * c + b] = T(p);
            }
            l[a] = l[a] * rescale + sum;
            m[a] = m_new;
            for (long d = 0; d < dh; ++d) acc[a * dh + d] *= rescale;
          }
          blas_s += host_gemm(dev, false, false, int(r), int(dh), int(c), M(1), static_cast<const T*>(pt.data()),
                              int(c), x.v(h, j0), int(x.ld()), M(1), acc.data(), int(dh));
        }
        for (long a = 0; a < r; ++a) {
          T* o = out + (q * S + i0 + a) * hy + h * dh;
          for (long d = 0; d < dh; ++d) o[d] = T(acc[a * dh + d] / l[a]);
          lse[(q * heads + h) * S + i0 + a] = m[a] + std::log(l[a]);
        }
      }
  }
  return blas_s;
}

// Backward from the output, its gradient and lse: δ_i = dO_i·O_i, then the
// two passes above. dqkv is written whole (Q, K and V columns), each value
// accumulated in M and rounded once.
template <typename T>
double flash_attention_backward(Device& dev, const T* qkv, const T* out, const master_t<T>* lse, const T* dout,
                                T* dqkv, long seqs, long S, long heads, long kv, long dh) {
  using M = master_t<T>;
  const HeadLayout hl{heads, kv, dh};
  const long hy = hl.hy(), ld = hl.ld(), B = kFlashTile, group = hl.group();
  const M scale = M(1) / std::sqrt(M(dh));
  std::vector<M> delta(size_t(seqs * heads * S));
  for (long q = 0; q < seqs; ++q)
    for (long i = 0; i < S; ++i)
      for (long h = 0; h < heads; ++h) {
        const T* o = out + (q * S + i) * hy + h * dh;
        const T* g = dout + (q * S + i) * hy + h * dh;
        delta[size_t((q * heads + h) * S + i)] = sum_lanes<M>(size_t(dh), [o, g](size_t d) { return M(o[d]) * M(g[d]); });
      }
  std::vector<M> s(B * B), p(B * B), dp(B * B), acc_a(B * dh), acc_b(B * dh);
  std::vector<T> pt(B * B), dst(B * B);
  double blas_s = 0;
  // S, P and dS of query tile (h, i0) against key tile j0, into s/p/dp and
  // their T copies pt/dst.
  auto tile = [&](const flash::Heads<T>& x, long q, long h, long i0, long r, long j0, long c) {
    const long row = (q * heads + h) * S + i0;
    blas_s += host_gemm(dev, false, true, int(r), int(c), int(dh), scale, x.q(h, i0), int(ld), x.k(h, j0), int(ld),
                        M(0), s.data(), int(c));
    flash::probabilities(s.data(), lse + row, i0, j0, r, c, p.data(), pt.data());
    blas_s += host_gemm(dev, false, true, int(r), int(c), int(dh), M(1), dout + (q * S + i0) * hy + h * dh, int(hy),
                        x.v(h, j0), int(ld), M(0), dp.data(), int(c));
    flash::score_grads(p.data(), dp.data(), delta.data() + row, scale, r, c, dst.data());
  };
  auto write = [&](const std::vector<M>& acc, T* to, long rows) {
    for (long a = 0; a < rows; ++a)
      for (long d = 0; d < dh; ++d) to[a * ld + d] = T(acc[a * dh + d]);
  };
  for (long q = 0; q < seqs; ++q) {
    const flash::Heads<T> x{qkv + q * S * ld, hl};
    T* dbase = dqkv + q * S * ld;
    for (long b = 0; b < kv; ++b)  // dK (acc_a) and dV (acc_b) per key tile
      for (long j0 = 0; j0 < S; j0 += B) {
        const long c = std::min(B, S - j0);
        std::fill(acc_a.begin(), acc_a.end(), M(0));
        std::fill(acc_b.begin(), acc_b.end(), M(0));
        for (long h = b * group; h < (b + 1) * group; ++h)
          for (long i0 = j0; i0 < S; i0 += B) {
            const long r = std::min(B, S - i0);
            tile(x, q, h, i0, r, j0, c);
            const T* dO = dout + (q * S + i0) * hy + h * dh;
            blas_s += host_gemm(dev, true, false, int(c), int(dh), int(r), M(1), static_cast<const T*>(pt.data()),
                                int(c), dO, int(hy), M(1), acc_b.data(), int(dh));
            blas_s += host_gemm(dev, true, false, int(c), int(dh), int(r), M(1), static_cast<const T*>(dst.data()),
                                int(c), x.q(h, i0), int(ld), M(1), acc_a.data(), int(dh));
          }
        write(acc_a, dbase + j0 * ld + hl.k(b * group), c);
        write(acc_b, dbase + j0 * ld + hl.v(b * group), c);
      }
    for (long h = 0; h < heads; ++h)  // dQ (acc_a) per query tile
      for (long i0 = 0; i0 < S; i0 += B) {
        const long r = std::min(B, S - i0);
        std::fill(acc_a.begin(), acc_a.end(), M(0));
        for (long j0 = 0; j0 <= i0; j0 += B) {
          const long c = std::min(B, S - j0);
          tile(x, q, h, i0, r, j0, c);
          blas_s += host_gemm(dev, false, false, int(r), int(dh), int(c), M(1), static_cast<const T*>(dst.data()),
                              int(c), x.k(h, j0), int(ld), M(1), acc_a.data(), int(dh));
        }
        write(acc_a, dbase + i0 * ld + hl.q(h), r);
      }
  }
  return blas_s;
}

}  // namespace ff::engine
