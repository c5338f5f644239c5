// Fused causal attention on the GPU (kernels.hpp), the twin of
// engine/flash_attention.hpp's: the scores stay on chip, 64-key tiles visited
// from the first to the diagonal with an online softmax forward, and
// backward recomputes P from the log-sum-exp instead of reading S² saved
// probabilities. Layouts as attention.cu's: query head h of sequence q reads
// Q at qkv + q·S·ld + h·dh and KV head b = h/(heads/kv) after the hy Q
// columns; lse and delta are [seqs, heads, S].
// Two implementations of the same arithmetic: a SIMT one for every dtype and
// head size up to kFlashMaxHeadDim (tiles in shared memory as M, each thread
// a few outputs), and one on bf16 tensor cores for dh 64 and 128, the sizes
// models train with (mma.sync m16n8k16, whose fragment layout is documented,
// so S, P and the accumulators stay in registers). Backward has no atomics:
// a KV head's dK and dV are one block's sums over its group's query heads in
// head order, and dQ another block's over the key tiles, so reruns are
// bitwise equal.
#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

#include "engine/cuda/kernels.hpp"
#include "engine/cuda/scalar.cuh"
#include "engine/runtime/cuda_check.hpp"

namespace ff::cuda {

namespace {

// The key tile of the online softmax: it decides the running maxima P is
// rounded against, so every path and the cpu's use it.
constexpr int kKeyTile = 64;

template <typename T, typename M>
__device__ inline M round_to(M v) {
  if constexpr (std::is_same_v<T, bf16>) return __bfloat162float(__float2bfloat16_rn(v));
  else return v;
}

template <typename M>
__device__ inline M warp_sum(M v) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
template <typename M>
__device__ inline M warp_max(M v) {
  for (int o = 16; o > 0; o /= 2) v = fmax(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Σ_d dO·O per (token, query head), one warp each.
template <typename T, typename M = master_t<T>>
__global__ void flash_delta_kernel(const T* out, const T* dout, M* delta, long rows, long S, long heads, long dh) {
  const long w = long(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (w >= rows) return;  // the whole warp
  const long token = w / heads, h = w % heads, at = token * heads * dh + h * dh;
  M acc = 0;
  for (long d = threadIdx.x % 32; d < dh; d += 32) acc += M(load(dout + at + d)) * M(load(out + at + d));
  acc = warp_sum(acc);
  if (threadIdx.x % 32 == 0) delta[((token / S) * heads + h) * S + token % S] = acc;
}

// ---------------------------------------------------------------------------
// SIMT: 256 threads as 16×16; thread (ty, tx) owns rows ty + 16a and
// columns tx + 16c of each tile product. Shared rows are padded to an odd
// number of M (dh + 1, 65, 33) so a half-warp's column reads fall in distinct
// banks. Query blocks of 32 rows (a half of the forward's 64-key tile: rows
// are independent, and it keeps fp64 at dh 128 under 160 KB); backward's key
// tiles are 32 too, which only reorders its sums.
constexpr int kSimtThreads = 256;
constexpr int kSimtRows = 32;

// acc[a][c] += Σ_k A(ty + 16a, k)·B(k, tx + 16c), A(r, k) at A[r·lda + k]
// (or A[k·lda + r] transposed), B(k, c) at B[k·ldb + c] (or B[c·ldb + k]).
// Columns past `cols` read the last one and are never stored.
template <int RA, int CB, bool TA, bool TB, typename M>
__device__ void tile_mac(M (&acc)[RA][CB], const M* A, int lda, const M* B, int ldb, int K, int cols) {
  const int ty = threadIdx.x / 16, tx = threadIdx.x % 16;
  for (int k = 0; k < K; ++k) {
    M a[RA], b[CB];
#pragma unroll
    for (int i = 0; i < RA; ++i) a[i] = TA ? A[k * lda + ty + 16 * i] : A[(ty + 16 * i) * lda + k];
#pragma unroll
    for (int j = 0; j < CB; ++j) {
      const int c = min(tx + 16 * j, cols - 1);
      b[j] = TB ? B[c * ldb + k] : B[k * ldb + c];
    }
#pragma unroll
    for (int i = 0; i < RA; ++i)
#pragma unroll
      for (int j = 0; j < CB; ++j) acc[i][j] += a[i] * b[j];
  }
}

// `rows` rows of dh values from src (row stride lds) into dst (stride
// dh + 1), widened to M; rows from `valid` on (past S) zero.
template <typename T, typename M>
__device__ void simt_load(M* dst, const T* src, long lds, int rows, long valid, int dh) {
  for (int x = threadIdx.x; x < rows * dh; x += blockDim.x) {
    const int r = x / dh, d = x % dh;
    dst[r * (dh + 1) + d] = r < valid ? M(load(src + r * lds + d)) : M(0);
  }
}

// Forward, one block per (32 queries, query head, sequence).
template <typename T, typename M = master_t<T>>
__global__ void __launch_bounds__(kSimtThreads)
    flash_forward_simt(const T* qkv, T* out, M* lse, long S, long heads, long kv, int dh) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  M* Qs = reinterpret_cast<M*>(smem_raw);   // [32][dh + 1]
  M* KVs = Qs + kSimtRows * (dh + 1);       // [64][dh + 1]: K, then V
  M* Ps = KVs + kKeyTile * (dh + 1);        // [32][65]: scores, then P̃
  M* alpha = Ps + kSimtRows * (kKeyTile + 1);  // [32]
  M* lsum = alpha + kSimtRows;                 // [32]
  const int ty = threadIdx.x / 16, tx = threadIdx.x % 16, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const long q = blockIdx.z, h = blockIdx.y, q0 = long(gridDim.x - 1 - blockIdx.x) * kSimtRows;  // long rows first
  const long ld = (heads + 2 * kv) * dh, hy = heads * dh, b = h / (heads / kv);
  const T* base = qkv + q * S * ld;
  const M scale = M(1) / sqrt(M(dh)), ninf = -M(INFINITY);
  simt_load(Qs, base + q0 * ld + h * dh, ld, kSimtRows, S - q0, dh);
  M acc[2][8] = {};
  M m[4], l[4];  // rows warp + 8·r, the same in every lane of the warp
  for (int r = 0; r < 4; ++r) m[r] = ninf, l[r] = 0;
  const long last = (q0 + kSimtRows - 1) / kKeyTile;
  for (long kt = 0; kt <= last; ++kt) {
    const long k0 = kt * kKeyTile;
    simt_load(KVs, base + k0 * ld + hy + b * dh, ld, kKeyTile, S - k0, dh);
    __syncthreads();  // K and (first tile) Q in
    M s[2][4] = {};
    tile_mac<2, 4, false, true>(s, Qs, dh + 1, KVs, dh + 1, dh, kKeyTile);
    for (int a = 0; a < 2; ++a)
      for (int c = 0; c < 4; ++c) {
        const long i = q0 + ty + 16 * a, j = k0 + tx + 16 * c;
        Ps[(ty + 16 * a) * (kKeyTile + 1) + tx + 16 * c] = j <= i && j < S ? s[a][c] * scale : ninf;
      }
    __syncthreads();  // K read, scores written
    simt_load(KVs, base + k0 * ld + hy + (kv + b) * dh, ld, kKeyTile, S - k0, dh);
    for (int r = 0; r < 4; ++r) {
      M* row = Ps + (warp + 8 * r) * (kKeyTile + 1);
      const M s0 = row[lane], s1 = row[lane + 32];
      // Finite: key k0 ≤ every row of the block, and k0 < S.
      const M m_new = fmax(m[r], warp_max(fmax(s0, s1)));
      const M p0 = exp(s0 - m_new), p1 = exp(s1 - m_new), a = exp(m[r] - m_new);
      l[r] = l[r] * a + warp_sum(p0 + p1);
      m[r] = m_new;
      row[lane] = round_to<T>(p0);
      row[lane + 32] = round_to<T>(p1);
      if (lane == 0) alpha[warp + 8 * r] = a;
    }
    __syncthreads();  // V in, P̃ and α written
    for (int a = 0; a < 2; ++a)
      for (int c = 0; c < 8; ++c) acc[a][c] *= alpha[ty + 16 * a];
    tile_mac<2, 8, false, false>(acc, Ps, kKeyTile + 1, KVs, dh + 1, kKeyTile, dh);
    __syncthreads();  // V and P̃ read before the next tile overwrites them
  }
  for (int r = 0; r < 4; ++r) {
    const long i = q0 + warp + 8 * r;
    if (lane == 0) {
      lsum[warp + 8 * r] = l[r];
      if (i < S) lse[(q * heads + h) * S + i] = m[r] + log(l[r]);
    }
  }
  __syncthreads();
  for (int a = 0; a < 2; ++a) {
    const long i = q0 + ty + 16 * a;
    if (i >= S) continue;
    for (int c = 0; c < 8; ++c) {
      const int d = tx + 16 * c;
      if (d < dh) store(out + (q * S + i) * hy + h * dh + d, M(acc[a][c] / lsum[ty + 16 * a]));
    }
  }
}

// P and dS of one 32×32 tile, rows queries i0.., columns keys j0.., from Q,
// K, dO, V in shared memory: P = exp(scale·QKᵀ − lse) causal, dS = P·(dO·Vᵀ
// − delta)·scale, each rounded to T into Ps and dSs (either may be null).
template <typename T, typename M>
__device__ void simt_p_ds(const M* Qs, const M* Ks, const M* dOs, const M* Vs, const M* lse_s, const M* delta_s,
                          M* Ps, M* dSs, long i0, long j0, long S, int dh, M scale) {
  const int ty = threadIdx.x / 16, tx = threadIdx.x % 16;
  M s[2][2] = {}, dp[2][2] = {};
  tile_mac<2, 2, false, true>(s, Qs, dh + 1, Ks, dh + 1, dh, kSimtRows);
  tile_mac<2, 2, false, true>(dp, dOs, dh + 1, Vs, dh + 1, dh, kSimtRows);
  for (int a = 0; a < 2; ++a)
    for (int c = 0; c < 2; ++c) {
      const int r = ty + 16 * a, k = tx + 16 * c;
      const long i = i0 + r, j = j0 + k;
      const M p = j <= i && i < S ? exp(s[a][c] * scale - lse_s[r]) : M(0);
      const M ds = p * (dp[a][c] - delta_s[r]) * scale;
      if (Ps) Ps[r * (kSimtRows + 1) + k] = round_to<T>(p);
      dSs[r * (kSimtRows + 1) + k] = round_to<T>(ds);
    }
}

// lse and delta of rows i0.. (the pointers at row i0), zero past S.
template <typename M>
__device__ void simt_row_stats(M* lse_s, M* delta_s, const M* lse, const M* delta, long i0, long S) {
  const int r = threadIdx.x;
  if (r < kSimtRows) {
    lse_s[r] = i0 + r < S ? lse[r] : M(0);
    delta_s[r] = i0 + r < S ? delta[r] : M(0);
  }
}

// dK and dV of 32 keys of one KV head: one block per (key tile, KV head,
// sequence), over the group's query heads in order and the query tiles from
// the diagonal on.
template <typename T, typename M = master_t<T>>
__global__ void __launch_bounds__(kSimtThreads)
    flash_backward_kv_simt(const T* qkv, const M* lse, const M* delta, const T* dout, T* dqkv, long S, long heads,
                           long kv, int dh) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const int tile = kSimtRows * (dh + 1), ptile = kSimtRows * (kSimtRows + 1);
  M* Ks = reinterpret_cast<M*>(smem_raw);
  M* Vs = Ks + tile;
  M* Qs = Vs + tile;
  M* dOs = Qs + tile;
  M* Ps = dOs + tile;
  M* dSs = Ps + ptile;
  M* lse_s = dSs + ptile;
  M* delta_s = lse_s + kSimtRows;
  const int ty = threadIdx.x / 16, tx = threadIdx.x % 16;
  const long q = blockIdx.z, b = blockIdx.y, j0 = long(blockIdx.x) * kSimtRows;
  const long ld = (heads + 2 * kv) * dh, hy = heads * dh, group = heads / kv;
  const long tiles = (S + kSimtRows - 1) / kSimtRows;
  const T* base = qkv + q * S * ld;
  const M scale = M(1) / sqrt(M(dh));
  simt_load(Ks, base + j0 * ld + hy + b * dh, ld, kSimtRows, S - j0, dh);
  simt_load(Vs, base + j0 * ld + hy + (kv + b) * dh, ld, kSimtRows, S - j0, dh);
  M dk[2][8] = {}, dv[2][8] = {};
  for (long h = b * group; h < (b + 1) * group; ++h)
    for (long it = blockIdx.x; it < tiles; ++it) {
      const long i0 = it * kSimtRows;
      __syncthreads();  // the last tile's Q, dO, P, dS read
      simt_load(Qs, base + i0 * ld + h * dh, ld, kSimtRows, S - i0, dh);
      simt_load(dOs, dout + (q * S + i0) * hy + h * dh, hy, kSimtRows, S - i0, dh);
      simt_row_stats(lse_s, delta_s, lse + (q * heads + h) * S + i0, delta + (q * heads + h) * S + i0, i0, S);
      __syncthreads();
      simt_p_ds<T>(Qs, Ks, dOs, Vs, lse_s, delta_s, Ps, dSs, i0, j0, S, dh, scale);
      __syncthreads();
      tile_mac<2, 8, true, false>(dv, Ps, kSimtRows + 1, dOs, dh + 1, kSimtRows, dh);  // Pᵀ·dO
      tile_mac<2, 8, true, false>(dk, dSs, kSimtRows + 1, Qs, dh + 1, kSimtRows, dh);  // dSᵀ·Q
    }
  for (int a = 0; a < 2; ++a) {
    const long j = j0 + ty + 16 * a;
    if (j >= S) continue;
    T* row = dqkv + (q * S + j) * ld + hy;
    for (int c = 0; c < 8; ++c) {
      const int d = tx + 16 * c;
      if (d >= dh) continue;
      store(row + b * dh + d, dk[a][c]);
      store(row + (kv + b) * dh + d, dv[a][c]);
    }
  }
}

// dQ of 32 queries of one query head, over the key tiles to the diagonal.
template <typename T, typename M = master_t<T>>
__global__ void __launch_bounds__(kSimtThreads)
    flash_backward_q_simt(const T* qkv, const M* lse, const M* delta, const T* dout, T* dqkv, long S, long heads,
                          long kv, int dh) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const int tile = kSimtRows * (dh + 1), ptile = kSimtRows * (kSimtRows + 1);
  M* Qs = reinterpret_cast<M*>(smem_raw);
  M* dOs = Qs + tile;
  M* Ks = dOs + tile;
  M* Vs = Ks + tile;
  M* dSs = Vs + tile;
  M* lse_s = dSs + ptile;
  M* delta_s = lse_s + kSimtRows;
  const int ty = threadIdx.x / 16, tx = threadIdx.x % 16;
  const long q = blockIdx.z, h = blockIdx.y, it = gridDim.x - 1 - blockIdx.x, i0 = it * kSimtRows;
  const long ld = (heads + 2 * kv) * dh, hy = heads * dh, b = h / (heads / kv);
  const T* base = qkv + q * S * ld;
  const M scale = M(1) / sqrt(M(dh));
  simt_load(Qs, base + i0 * ld + h * dh, ld, kSimtRows, S - i0, dh);
  simt_load(dOs, dout + (q * S + i0) * hy + h * dh, hy, kSimtRows, S - i0, dh);
  simt_row_stats(lse_s, delta_s, lse + (q * heads + h) * S + i0, delta + (q * heads + h) * S + i0, i0, S);
  M dq[2][8] = {};
  for (long jt = 0; jt <= it; ++jt) {
    const long j0 = jt * kSimtRows;
    __syncthreads();  // the last tile's K and dS read
    simt_load(Ks, base + j0 * ld + hy + b * dh, ld, kSimtRows, S - j0, dh);
    simt_load(Vs, base + j0 * ld + hy + (kv + b) * dh, ld, kSimtRows, S - j0, dh);
    __syncthreads();
    simt_p_ds<T>(Qs, Ks, dOs, Vs, lse_s, delta_s, static_cast<M*>(nullptr), dSs, i0, j0, S, dh, scale);
    __syncthreads();
    tile_mac<2, 8, false, false>(dq, dSs, kSimtRows + 1, Ks, dh + 1, kSimtRows, dh);  // dS·K
  }
  for (int a = 0; a < 2; ++a) {
    const long i = i0 + ty + 16 * a;
    if (i >= S) continue;
    for (int c = 0; c < 8; ++c) {
      const int d = tx + 16 * c;
      if (d < dh) store(dqkv + (q * S + i) * ld + h * dh + d, dq[a][c]);
    }
  }
}

// ---------------------------------------------------------------------------
// Tensor cores, bf16, dh = DH ∈ {64, 128}: 128 threads, four warps of 16
// rows each (queries forward and for dQ, keys for dK and dV) over 64-row
// tiles. mma.sync m16n8k16 (sm_80 and sm_90): with g = lane/4, t = lane%4,
// A (16×16, row-major) is four registers of two bf16, rows g and g + 8,
// columns 2t, 2t + 1 and those + 8; B (16×8) two, rows (k) 2t, 2t + 1 and
// + 8 of column g; C (16×8, fp32) c0, c1 in row g, c2, c3 in row g + 8, both
// at columns 2t, 2t + 1. So a C tile of scores, two 8-column blocks side by
// side, is already P's A fragment once packed to bf16: P never leaves
// registers. Every B operand is read from shared memory stored n-major
// (B(k, n) at [n][k]): K for QKᵀ, V transposed for P·V, and so on; a row of
// 8 mod 64 bf16 puts the eight g rows of a fragment read 4 banks apart.
namespace tc {

using bf = __nv_bfloat16;
using u32 = std::uint32_t;
constexpr int kThreads = 128;
constexpr int kTile = 64;
constexpr int kTransLd = kTile + 8;  // a transposed tile's row: 64 tokens

template <int DH>
constexpr int kRowLd = DH + 8;  // a token-major tile's row

__device__ inline u32 ld32(const bf* p) { return *reinterpret_cast<const u32*>(p); }

__device__ inline u32 pack(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);  // lo in the low half: the lower column
  return *reinterpret_cast<const u32*>(&v);
}

__device__ inline void mma(float (&c)[4], const u32 (&a)[4], u32 b0, u32 b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// A fragment of rows r0.., columns k0.. of row-major X.
__device__ inline void load_a(u32 (&a)[4], const bf* X, int ld, int r0, int k0) {
  const int g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
  const bf* p = X + (r0 + g) * ld + k0 + 2 * t;
  a[0] = ld32(p);
  a[1] = ld32(p + 8 * ld);
  a[2] = ld32(p + 8);
  a[3] = ld32(p + 8 * ld + 8);
}

// acc[n] (columns 8n..8n + 7) += A(rows r0.., KC·16 columns) · B, B n-major.
template <int NT, int KC>
__device__ void warp_mma(float (&acc)[NT][4], const bf* A, int lda, int r0, const bf* B, int ldb) {
  const int g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
#pragma unroll
  for (int kc = 0; kc < KC; ++kc) {
    u32 a[4];
    load_a(a, A, lda, r0, 16 * kc);
#pragma unroll
    for (int n = 0; n < NT; ++n) {
      const bf* p = B + (8 * n + g) * ldb + 16 * kc + 2 * t;
      mma(acc[n], a, ld32(p), ld32(p + 8));
    }
  }
}

// acc += round_bf16(X)·B with X a 16×64 C tile in registers (x[n] its
// columns 8n..), B n-major with 64 k.
template <int NT>
__device__ void warp_mma_regs(float (&acc)[NT][4], const float (&x)[8][4], const bf* B, int ldb) {
  const int g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
#pragma unroll
  for (int kc = 0; kc < 4; ++kc) {
    const u32 a[4] = {pack(x[2 * kc][0], x[2 * kc][1]), pack(x[2 * kc][2], x[2 * kc][3]),
                      pack(x[2 * kc + 1][0], x[2 * kc + 1][1]), pack(x[2 * kc + 1][2], x[2 * kc + 1][3])};
#pragma unroll
    for (int n = 0; n < NT; ++n) {
      const bf* p = B + (8 * n + g) * ldb + 16 * kc + 2 * t;
      mma(acc[n], a, ld32(p), ld32(p + 8));
    }
  }
}

// 64 token rows of DH bf16 from src (row stride lds) into Xs [64][DH + 8]
// and/or Xt [DH][72] transposed; rows from `valid` on zero, 16 bytes a
// thread. Transposing, a warp's lanes take consecutive rows so its 2-byte
// stores are consecutive; else consecutive chunks of a row (coalesced).
template <int DH>
__device__ void load_tile(bf* Xs, bf* Xt, const bf* src, long lds, long valid) {
  constexpr int chunks = DH / 8;
  for (int x = threadIdx.x; x < kTile * chunks; x += kThreads) {
    const int r = Xt ? x % kTile : x / chunks, c = Xt ? x / kTile : x % chunks;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (r < valid) v = *reinterpret_cast<const uint4*>(src + r * lds + 8 * c);
    if (Xs) *reinterpret_cast<uint4*>(Xs + r * kRowLd<DH> + 8 * c) = v;
    if (Xt) {
      const bf* e = reinterpret_cast<const bf*>(&v);
#pragma unroll
      for (int k = 0; k < 8; ++k) Xt[(8 * c + k) * kTransLd + r] = e[k];
    }
  }
}

// Rows r of a C tile's register e: e / 2; its column within an 8-block.
__device__ inline int c_col(int n, int e) { return 8 * n + 2 * (threadIdx.x % 4) + (e & 1); }

template <int DH>
constexpr size_t forward_smem() {
  return size_t(2 * kTile * kRowLd<DH> + DH * kTransLd) * sizeof(bf);
}

// Forward, one block per (64 queries, query head, sequence): Q fragments in
// registers, K and Vᵀ tiles through shared memory.
template <int DH>
__global__ void __launch_bounds__(kThreads)
    flash_forward_tc(const bf* qkv, bf* out, float* lse, long S, long heads, long kv) {
  constexpr int LD = kRowLd<DH>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  bf* Qs = reinterpret_cast<bf*>(smem_raw);  // [64][LD]
  bf* Ks = Qs + kTile * LD;                   // [64][LD]
  bf* Vt = Ks + kTile * LD;                   // [DH][72]
  const int warp = threadIdx.x / 32, g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
  const long q = blockIdx.z, h = blockIdx.y, qt = gridDim.x - 1 - blockIdx.x, q0 = qt * kTile;  // long rows first
  const long ld = (heads + 2 * kv) * DH, hy = heads * DH, b = h / (heads / kv);
  const bf* base = qkv + q * S * ld;
  const float scale = 1.0f / sqrtf(float(DH));
  load_tile<DH>(Qs, nullptr, base + q0 * ld + h * DH, ld, S - q0);
  __syncthreads();
  u32 qf[DH / 16][4];
#pragma unroll
  for (int kc = 0; kc < DH / 16; ++kc) load_a(qf[kc], Qs, LD, 16 * warp, 16 * kc);
  const long row[2] = {q0 + 16 * warp + g, q0 + 16 * warp + g + 8};
  float o[DH / 8][4] = {}, m[2] = {-INFINITY, -INFINITY}, l[2] = {0, 0};
  for (long kt = 0; kt <= qt; ++kt) {
    const long k0 = kt * kTile;
    __syncthreads();  // the last tile's K and Vᵀ (and Q's fragments) read
    load_tile<DH>(Ks, nullptr, base + k0 * ld + hy + b * DH, ld, S - k0);
    load_tile<DH>(nullptr, Vt, base + k0 * ld + hy + (kv + b) * DH, ld, S - k0);
    __syncthreads();
    float s[8][4] = {};
#pragma unroll
    for (int kc = 0; kc < DH / 16; ++kc)
#pragma unroll
      for (int n = 0; n < 8; ++n) {
        const bf* p = Ks + (8 * n + g) * LD + 16 * kc + 2 * t;
        mma(s[n], qf[kc], ld32(p), ld32(p + 8));
      }
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const long j = k0 + c_col(n, e);
        s[n][e] = j <= row[e / 2] && j < S ? s[n][e] * scale : -INFINITY;
        mx[e / 2] = fmaxf(mx[e / 2], s[n][e]);
      }
    float alpha[2], sum[2] = {0, 0};
#pragma unroll
    for (int r = 0; r < 2; ++r) {  // the quad of lanes 4g.. holds row g's 64 columns
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
      const float m_new = fmaxf(m[r], mx[r]);  // finite: key k0 ≤ every row, k0 < S
      alpha[r] = expf(m[r] - m_new);
      m[r] = m_new;
    }
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) sum[e / 2] += (s[n][e] = expf(s[n][e] - m[e / 2]));
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      sum[r] += __shfl_xor_sync(0xffffffffu, sum[r], 1);
      sum[r] += __shfl_xor_sync(0xffffffffu, sum[r], 2);
      l[r] = l[r] * alpha[r] + sum[r];
    }
#pragma unroll
    for (int n = 0; n < DH / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[n][e] *= alpha[e / 2];
    warp_mma_regs<DH / 8>(o, s, Vt, kTransLd);
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const long i = row[r];
    if (i >= S) continue;
    bf* dst = out + (q * S + i) * hy + h * DH + 2 * t;
#pragma unroll
    for (int n = 0; n < DH / 8; ++n)
      *reinterpret_cast<__nv_bfloat162*>(dst + 8 * n) =
          __floats2bfloat162_rn(o[n][2 * r] / l[r], o[n][2 * r + 1] / l[r]);
    if (t == 0) lse[(q * heads + h) * S + i] = m[r] + logf(l[r]);
  }
}

template <int DH>
constexpr size_t backward_kv_smem() {
  return size_t(4 * kTile * kRowLd<DH> + 2 * DH * kTransLd) * sizeof(bf) + 2 * kTile * sizeof(float);
}

// dK and dV of 64 keys (16 a warp) of KV head b: one block per (key tile,
// KV head, sequence), over the group's query heads in order and the query
// tiles from the diagonal on. Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ put the warp's keys
// in C rows, so Pᵀ and dSᵀ are A fragments for dV += Pᵀ·dO, dK += dSᵀ·Q.
template <int DH>
__global__ void __launch_bounds__(kThreads)
    flash_backward_kv_tc(const bf* qkv, const float* lse, const float* delta, const bf* dout, bf* dqkv, long S,
                         long heads, long kv) {
  constexpr int LD = kRowLd<DH>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  bf* Ks = reinterpret_cast<bf*>(smem_raw);  // [64][LD] each
  bf* Vs = Ks + kTile * LD;
  bf* Qs = Vs + kTile * LD;
  bf* dOs = Qs + kTile * LD;
  bf* Qt = dOs + kTile * LD;  // [DH][72] each
  bf* dOt = Qt + DH * kTransLd;
  float* lse_s = reinterpret_cast<float*>(dOt + DH * kTransLd);  // [64] each
  float* delta_s = lse_s + kTile;
  const int warp = threadIdx.x / 32, g = threadIdx.x % 32 / 4;
  const long q = blockIdx.z, b = blockIdx.y, kt = blockIdx.x, k0 = kt * kTile;
  const long ld = (heads + 2 * kv) * DH, hy = heads * DH, group = heads / kv, tiles = (S + kTile - 1) / kTile;
  const bf* base = qkv + q * S * ld;
  const float scale = 1.0f / sqrtf(float(DH));
  load_tile<DH>(Ks, nullptr, base + k0 * ld + hy + b * DH, ld, S - k0);
  load_tile<DH>(Vs, nullptr, base + k0 * ld + hy + (kv + b) * DH, ld, S - k0);
  const long key[2] = {k0 + 16 * warp + g, k0 + 16 * warp + g + 8};
  float dk[DH / 8][4] = {}, dv[DH / 8][4] = {};
  for (long h = b * group; h < (b + 1) * group; ++h)
    for (long it = kt; it < tiles; ++it) {
      const long i0 = it * kTile;
      __syncthreads();  // the last tile's Q, dO and statistics read
      load_tile<DH>(Qs, Qt, base + i0 * ld + h * DH, ld, S - i0);
      load_tile<DH>(dOs, dOt, dout + (q * S + i0) * hy + h * DH, hy, S - i0);
      if (threadIdx.x < kTile) {
        const long i = i0 + threadIdx.x;
        lse_s[threadIdx.x] = i < S ? lse[(q * heads + h) * S + i] : 0.0f;
        delta_s[threadIdx.x] = i < S ? delta[(q * heads + h) * S + i] : 0.0f;
      }
      __syncthreads();
      float p[8][4] = {};
      warp_mma<8, DH / 16>(p, Ks, LD, 16 * warp, Qs, LD);  // Sᵀ
#pragma unroll
      for (int n = 0; n < 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int c = c_col(n, e);
          const long i = i0 + c;
          p[n][e] = i >= key[e / 2] && i < S ? expf(p[n][e] * scale - lse_s[c]) : 0.0f;
        }
      warp_mma_regs<DH / 8>(dv, p, dOt, kTransLd);
      float ds[8][4] = {};
      warp_mma<8, DH / 16>(ds, Vs, LD, 16 * warp, dOs, LD);  // dPᵀ
#pragma unroll
      for (int n = 0; n < 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) ds[n][e] = p[n][e] * (ds[n][e] - delta_s[c_col(n, e)]) * scale;
      warp_mma_regs<DH / 8>(dk, ds, Qt, kTransLd);
    }
  const int t = threadIdx.x % 4;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    if (key[r] >= S) continue;
    bf* dst = dqkv + (q * S + key[r]) * ld + hy + b * DH + 2 * t;
#pragma unroll
    for (int n = 0; n < DH / 8; ++n) {
      *reinterpret_cast<__nv_bfloat162*>(dst + 8 * n) = __floats2bfloat162_rn(dk[n][2 * r], dk[n][2 * r + 1]);
      *reinterpret_cast<__nv_bfloat162*>(dst + kv * DH + 8 * n) =
          __floats2bfloat162_rn(dv[n][2 * r], dv[n][2 * r + 1]);
    }
  }
}

template <int DH>
constexpr size_t backward_q_smem() {
  return size_t(4 * kTile * kRowLd<DH> + DH * kTransLd) * sizeof(bf);
}

// dQ of 64 queries (16 a warp) of query head h, over the key tiles to the
// diagonal: S = Q·Kᵀ, dP = dO·Vᵀ, then dQ += dS·K.
template <int DH>
__global__ void __launch_bounds__(kThreads)
    flash_backward_q_tc(const bf* qkv, const float* lse, const float* delta, const bf* dout, bf* dqkv, long S,
                        long heads, long kv) {
  constexpr int LD = kRowLd<DH>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  bf* Qs = reinterpret_cast<bf*>(smem_raw);  // [64][LD] each
  bf* dOs = Qs + kTile * LD;
  bf* Ks = dOs + kTile * LD;
  bf* Vs = Ks + kTile * LD;
  bf* Kt = Vs + kTile * LD;  // [DH][72]
  const int warp = threadIdx.x / 32, g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
  const long q = blockIdx.z, h = blockIdx.y, qt = gridDim.x - 1 - blockIdx.x, q0 = qt * kTile;  // long rows first
  const long ld = (heads + 2 * kv) * DH, hy = heads * DH, b = h / (heads / kv);
  const bf* base = qkv + q * S * ld;
  const float scale = 1.0f / sqrtf(float(DH));
  load_tile<DH>(Qs, nullptr, base + q0 * ld + h * DH, ld, S - q0);
  load_tile<DH>(dOs, nullptr, dout + (q * S + q0) * hy + h * DH, hy, S - q0);
  const long row[2] = {q0 + 16 * warp + g, q0 + 16 * warp + g + 8};
  float row_lse[2], row_delta[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    row_lse[r] = row[r] < S ? lse[(q * heads + h) * S + row[r]] : 0.0f;
    row_delta[r] = row[r] < S ? delta[(q * heads + h) * S + row[r]] : 0.0f;
  }
  float dq[DH / 8][4] = {};
  for (long kt = 0; kt <= qt; ++kt) {
    const long k0 = kt * kTile;
    __syncthreads();  // the last tile's K, V and Kᵀ read
    load_tile<DH>(Ks, Kt, base + k0 * ld + hy + b * DH, ld, S - k0);
    load_tile<DH>(Vs, nullptr, base + k0 * ld + hy + (kv + b) * DH, ld, S - k0);
    __syncthreads();  // (the first time, Q and dO too)
    float p[8][4] = {}, ds[8][4] = {};
    warp_mma<8, DH / 16>(p, Qs, LD, 16 * warp, Ks, LD);    // S
    warp_mma<8, DH / 16>(ds, dOs, LD, 16 * warp, Vs, LD);  // dP
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const long j = k0 + c_col(n, e), i = row[e / 2];
        const float pe = j <= i && i < S ? expf(p[n][e] * scale - row_lse[e / 2]) : 0.0f;
        ds[n][e] = pe * (ds[n][e] - row_delta[e / 2]) * scale;
      }
    warp_mma_regs<DH / 8>(dq, ds, Kt, kTransLd);
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    if (row[r] >= S) continue;
    bf* dst = dqkv + (q * S + row[r]) * ld + h * DH + 2 * t;
#pragma unroll
    for (int n = 0; n < DH / 8; ++n)
      *reinterpret_cast<__nv_bfloat162*>(dst + 8 * n) = __floats2bfloat162_rn(dq[n][2 * r], dq[n][2 * r + 1]);
  }
}

}  // namespace tc

// ---------------------------------------------------------------------------

void check_shape(long seqs, long S, long heads, long kv, long dh) {
  if (S < 1 || dh < 1 || dh > kFlashMaxHeadDim || kv < 1 || heads % kv != 0 || seqs > 65535 || heads > 65535)
    FF_FATAL("flash attention: unsupported shape (dh " + std::to_string(dh) + ", heads " + std::to_string(heads) +
             ", kv " + std::to_string(kv) + ", seqs " + std::to_string(seqs) + ")");
}

// Dynamic shared memory above 48 KB has to be asked for per kernel.
template <typename Kernel>
void launch_config(Kernel kernel, size_t smem) {
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
}

bool aligned(const void* p, size_t bytes) { return reinterpret_cast<std::uintptr_t>(p) % bytes == 0; }

// The tensor-core path: bf16, dh 64 or 128, 16-byte rows for its vector
// loads (the bf16x2 stores need 4).
template <typename T>
bool use_tensor_cores(long dh, const void* qkv, const void* a, const void* b) {
  if constexpr (!std::is_same_v<T, bf16>) return false;
  else return (dh == 64 || dh == 128) && aligned(qkv, 16) && aligned(a, 16) && aligned(b, 16);
}

template <typename M>
size_t simt_forward_smem(long dh) {
  return size_t(kSimtRows * (dh + 1) + kKeyTile * (dh + 1) + kSimtRows * (kKeyTile + 1) + 2 * kSimtRows) *
         sizeof(M);
}
template <typename M>
size_t simt_backward_smem(long dh, int tiles) {
  return size_t(tiles * kSimtRows * (dh + 1) + 2 * kSimtRows * (kSimtRows + 1) + 2 * kSimtRows) * sizeof(M);
}

template <int DH>
void forward_tc(const bf16* qkv, bf16* out, float* lse, long seqs, long S, long heads, long kv, Stream s) {
  const auto* x = reinterpret_cast<const tc::bf*>(qkv);
  const dim3 grid(unsigned((S + tc::kTile - 1) / tc::kTile), unsigned(heads), unsigned(seqs));
  constexpr size_t smem = tc::forward_smem<DH>();
  launch_config(tc::flash_forward_tc<DH>, smem);
  tc::flash_forward_tc<DH><<<grid, tc::kThreads, smem, s>>>(x, reinterpret_cast<tc::bf*>(out), lse, S, heads, kv);
  CUDA_CHECK(cudaGetLastError());
}

template <int DH>
void backward_tc(const bf16* qkv, const float* lse, const float* delta, const bf16* dout, bf16* dqkv, long seqs,
                 long S, long heads, long kv, Stream s) {
  const auto* x = reinterpret_cast<const tc::bf*>(qkv);
  const auto* dO = reinterpret_cast<const tc::bf*>(dout);
  auto* dx = reinterpret_cast<tc::bf*>(dqkv);
  const unsigned tiles = unsigned((S + tc::kTile - 1) / tc::kTile);
  constexpr size_t kv_smem = tc::backward_kv_smem<DH>(), q_smem = tc::backward_q_smem<DH>();
  launch_config(tc::flash_backward_kv_tc<DH>, kv_smem);
  tc::flash_backward_kv_tc<DH><<<dim3(tiles, unsigned(kv), unsigned(seqs)), tc::kThreads, kv_smem, s>>>(
      x, lse, delta, dO, dx, S, heads, kv);
  CUDA_CHECK(cudaGetLastError());
  launch_config(tc::flash_backward_q_tc<DH>, q_smem);
  tc::flash_backward_q_tc<DH><<<dim3(tiles, unsigned(heads), unsigned(seqs)), tc::kThreads, q_smem, s>>>(
      x, lse, delta, dO, dx, S, heads, kv);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace

template <typename T>
void flash_attention_forward(const T* qkv, T* out, master_t<T>* lse, long seqs, long S, long heads, long kv, long dh,
                             Stream s) {
  using M = master_t<T>;
  if (seqs * S * heads == 0) return;
  check_shape(seqs, S, heads, kv, dh);
  if (use_tensor_cores<T>(dh, qkv, out, out)) {
    if constexpr (std::is_same_v<T, bf16>) {
      if (dh == 64) forward_tc<64>(qkv, out, lse, seqs, S, heads, kv, s);
      else forward_tc<128>(qkv, out, lse, seqs, S, heads, kv, s);
    }
    return;
  }
  const size_t smem = simt_forward_smem<M>(dh);
  launch_config(flash_forward_simt<T>, smem);
  const dim3 grid(unsigned((S + kSimtRows - 1) / kSimtRows), unsigned(heads), unsigned(seqs));
  flash_forward_simt<T><<<grid, kSimtThreads, smem, s>>>(qkv, out, lse, S, heads, kv, int(dh));
  CUDA_CHECK(cudaGetLastError());
}

template <typename T>
void flash_attention_backward(const T* qkv, const T* out, const master_t<T>* lse, const T* dout, T* dqkv,
                              master_t<T>* delta, long seqs, long S, long heads, long kv, long dh, Stream s) {
  using M = master_t<T>;
  if (seqs * S * heads == 0) return;
  check_shape(seqs, S, heads, kv, dh);
  const long rows = seqs * S * heads;
  flash_delta_kernel<T><<<unsigned((rows + 7) / 8), 256, 0, s>>>(out, dout, delta, rows, S, heads, dh);
  CUDA_CHECK(cudaGetLastError());
  if (use_tensor_cores<T>(dh, qkv, dout, dqkv)) {
    if constexpr (std::is_same_v<T, bf16>) {
      if (dh == 64) backward_tc<64>(qkv, lse, delta, dout, dqkv, seqs, S, heads, kv, s);
      else backward_tc<128>(qkv, lse, delta, dout, dqkv, seqs, S, heads, kv, s);
    }
    return;
  }
  const unsigned tiles = unsigned((S + kSimtRows - 1) / kSimtRows);
  const size_t kv_smem = simt_backward_smem<M>(dh, 4), q_smem = simt_backward_smem<M>(dh, 4);
  launch_config(flash_backward_kv_simt<T>, kv_smem);
  flash_backward_kv_simt<T><<<dim3(tiles, unsigned(kv), unsigned(seqs)), kSimtThreads, kv_smem, s>>>(
      qkv, lse, delta, dout, dqkv, S, heads, kv, int(dh));
  CUDA_CHECK(cudaGetLastError());
  launch_config(flash_backward_q_simt<T>, q_smem);
  flash_backward_q_simt<T><<<dim3(tiles, unsigned(heads), unsigned(seqs)), kSimtThreads, q_smem, s>>>(
      qkv, lse, delta, dout, dqkv, S, heads, kv, int(dh));
  CUDA_CHECK(cudaGetLastError());
}

#define FF_FLASH_ATTENTION(T, M)                                                                                 \
  template void flash_attention_forward<T>(const T*, T*, M*, long, long, long, long, long, Stream);           \
  template void flash_attention_backward<T>(const T*, const T*, const M*, const T*, T*, M*, long, long, long, \
                                            long, long, Stream);
FF_FLASH_ATTENTION(float, float)
FF_FLASH_ATTENTION(double, double)
FF_FLASH_ATTENTION(bf16, float)

}  // namespace ff::cuda
