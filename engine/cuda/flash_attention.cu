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
// Tensor cores, bf16, dh = DH ∈ {64, 128}, mma.sync m16n8k16 (sm_80 and
// sm_90), one warp per 16 rows (queries forward and for dQ, keys for dK and
// dV). Fragment layout, g = lane/4, t = lane%4: A (16×16, row-major) is four
// registers of two bf16, rows g and g + 8, columns 2t, 2t + 1 and those + 8;
// B (16×8) two, rows (k) 2t, 2t + 1 and + 8 of column g; C (16×8, fp32) c0,
// c1 in row g, c2, c3 in row g + 8, both at columns 2t, 2t + 1. So a C tile
// of scores, two 8-column blocks side by side, is already P's A fragment
// once packed to bf16: P never leaves registers.
//
// Every tile lies in shared memory as it does in global memory, token-major
// rows of DH, padded by 16 bytes so that the eight 16-byte rows an ldmatrix
// phase reads fall in distinct banks. That makes the loads plain 16-byte
// cp.async copies (zero-filled past S, so tails need no other care), and
// ldmatrix hands out fragments four 8×8 matrices at a time: plain for A and
// for a B stored n-major (K in QKᵀ, Q and dO in the transposed score
// products), .trans for a B stored k-major (V in P·V, dO and Q in dV and dK,
// K in dS·K), which is what a transposed copy in shared memory used to be
// for. The streamed tiles are double-buffered: tile n + 1's copies are in
// flight while tile n is computed, one barrier a tile.
//
// Blocks are 8 warps over 128 rows against 64-key (or 64-query) streamed
// tiles: each streamed tile feeds twice the rows of a 64-row block. The key
// tile stays 64 forward, the cpu twin's: the online softmax's running maxima
// are taken at its boundaries. A warp skips a streamed tile that lies wholly
// above the diagonal for its 16 rows (the same tiles the twin never visits)
// and tests the causal mask only on tiles that cross it; softmax runs in
// base 2 with scale·log2 e folded into one FMA per score.
namespace tc {

using bf = __nv_bfloat16;
using u32 = std::uint32_t;
constexpr int kWarps = 8;
constexpr int kThreads = 32 * kWarps;
constexpr int kRows = 16 * kWarps;  // a block's own rows
constexpr int kTile = 64;           // a streamed tile's rows
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

template <int DH>
constexpr int kLd = DH + 8;  // a tile's row in shared memory

__device__ inline u32 smem_u32(const void* p) { return static_cast<u32>(__cvta_generic_to_shared(p)); }

// 16 bytes global → shared, asynchronously; zeros where !valid (src is
// then not read, but must be a valid address all the same).
__device__ inline void cp_async16(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(dst)), "l"(src),
               "r"(valid ? 16 : 0)
               : "memory");
}
__device__ inline void cp_async4(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_u32(dst)), "l"(src), "r"(valid ? 4 : 0)
               : "memory");
}
__device__ inline void cp_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
__device__ inline void cp_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }

// Four 8×8 bf16 matrices; lane l gives the address of row l%8 of matrix l/8
// and receives, of each matrix, row l/4 columns 2(l%4), +1 (.trans: rows
// 2(l%4), +1 of column l/4).
__device__ inline void ldsm(u32 (&r)[4], const bf* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_u32(p)));
}
__device__ inline void ldsm_t(u32 (&r)[4], const bf* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_u32(p)));
}

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

// The A fragment of rows r0.., columns k0.. of row-major X: matrices (rows
// +0, +8) × (columns +0, +8) in a0..a3's order.
__device__ inline void load_a(u32 (&a)[4], const bf* X, int ld, int r0, int k0) {
  const int l = threadIdx.x % 32;
  ldsm(a, X + (r0 + (l & 15)) * ld + k0 + 8 * (l >> 4));
}

// acc[n] (columns 8n..) += A(16 rows from r0, 16·KC columns) · B with B
// stored n-major (B(k, n) at X[n][k]): QKᵀ-like, 64 columns.
template <int KC>
__device__ inline void mma_ab_nmajor(float (&acc)[8][4], const bf* A, int r0, const bf* B, int ld) {
  const int l = threadIdx.x % 32;
  // B: lane l addresses n = 16np + l%8 + 8(l/16), k = 16kc + 8((l/8)%2), so
  // the four matrices are (n +0, k +0), (n +0, k +8), (n +8, k +0), (n +8, k +8).
  const bf* bp = B + ((l & 7) + 8 * (l >> 4)) * ld + 8 * ((l >> 3) & 1);
#pragma unroll
  for (int kc = 0; kc < KC; ++kc) {
    u32 a[4];
    load_a(a, A, ld, r0, 16 * kc);
#pragma unroll
    for (int np = 0; np < 4; ++np) {
      u32 b[4];
      ldsm(b, bp + 16 * np * ld + 16 * kc);
      mma(acc[2 * np], a, b[0], b[1]);
      mma(acc[2 * np + 1], a, b[2], b[3]);
    }
  }
}

// acc[n] (columns 8n.., NT of them) += round_bf16(X) · B, X a 16×64 C tile in
// registers, B (64 × 8·NT) stored k-major (B(k, n) at V[k][n]): lane l
// addresses k = 16kc + l%16, n = 16np + 8(l/16), whose .trans matrices are
// (k +0, n +0), (k +8, n +0), (k +0, n +8), (k +8, n +8).
template <int NT>
__device__ inline void mma_regs_kmajor(float (&acc)[NT][4], const float (&x)[8][4], const bf* B, int ld) {
  const int l = threadIdx.x % 32;
  const bf* bp = B + (l & 15) * ld + 8 * (l >> 4);
#pragma unroll
  for (int kc = 0; kc < 4; ++kc) {
    const u32 a[4] = {pack(x[2 * kc][0], x[2 * kc][1]), pack(x[2 * kc][2], x[2 * kc][3]),
                      pack(x[2 * kc + 1][0], x[2 * kc + 1][1]), pack(x[2 * kc + 1][2], x[2 * kc + 1][3])};
#pragma unroll
    for (int np = 0; np < NT / 2; ++np) {
      u32 b[4];
      ldsm_t(b, bp + 16 * kc * ld + 16 * np);
      mma(acc[2 * np], a, b[0], b[1]);
      mma(acc[2 * np + 1], a, b[2], b[3]);
    }
  }
}

// R token rows of DH bf16 from src (row stride lds) into X [R][DH + 8],
// asynchronously; rows from `valid` on zero. Consecutive threads take
// consecutive 16-byte chunks of a row: coalesced.
template <int DH, int R>
__device__ inline void load_tile(bf* X, const bf* src, long lds, long valid) {
  constexpr int chunks = DH / 8;
  static_assert(R * chunks % kThreads == 0);
#pragma unroll
  for (int i = 0; i < R * chunks / kThreads; ++i) {
    const int x = int(threadIdx.x) + i * kThreads, r = x / chunks, c = x % chunks;
    const bool ok = r < valid;
    cp_async16(X + r * kLd<DH> + 8 * c, src + (ok ? r : 0) * lds + 8 * c, ok);
  }
}

// Column of a C tile's register e within 8-column block n; its row is g + 8·(e / 2).
__device__ inline int c_col(int n, int e) { return 8 * n + 2 * (threadIdx.x % 4) + (e & 1); }

template <int DH>
constexpr size_t forward_smem() {
  return size_t(kRows + 4 * kTile) * kLd<DH> * sizeof(bf);
}

// Forward, one block per (128 queries, query head, sequence): Q through
// shared memory into registers once, K and V tiles double-buffered.
template <int DH>
__global__ void __launch_bounds__(kThreads, 1)
    flash_forward_tc(const bf* qkv, bf* out, float* lse, long S, long heads, long kv) {
  constexpr int LD = kLd<DH>;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  bf* Qs = reinterpret_cast<bf*>(smem_raw);  // [128][LD]
  bf* Ks = Qs + kRows * LD;                   // [2][64][LD]
  bf* Vs = Ks + 2 * kTile * LD;               // [2][64][LD]
  const int warp = threadIdx.x / 32, g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
  const long q = blockIdx.z, h = blockIdx.y, q0 = long(gridDim.x - 1 - blockIdx.x) * kRows;  // long rows first
  const long ld = (heads + 2 * kv) * DH, hy = heads * DH, b = h / (heads / kv);
  const bf* base = qkv + q * S * ld;
  const bf* kbase = base + hy + b * DH;
  const bf* vbase = base + hy + (kv + b) * DH;
  const float sl2e = kLog2e / sqrtf(float(DH));  // scores to log2 units
  const long w0 = q0 + 16 * warp;                // the warp's first row
  const long last = min(q0 + kRows - 1, S - 1) / kTile;
  load_tile<DH, kRows>(Qs, base + q0 * ld + h * DH, ld, S - q0);
  load_tile<DH, kTile>(Ks, kbase, ld, S);
  load_tile<DH, kTile>(Vs, vbase, ld, S);
  cp_commit();
  const long row[2] = {w0 + g, w0 + g + 8};
  u32 qf[DH / 16][4];
  float o[DH / 8][4] = {}, m[2] = {-INFINITY, -INFINITY}, l[2] = {0, 0};  // m in log2 units
  for (long kt = 0; kt <= last; ++kt) {
    const long k0 = kt * kTile;
    cp_wait_all();
    __syncthreads();  // tile kt in; tile kt − 1's buffers read by every warp
    if (kt == 0) {
#pragma unroll
      for (int kc = 0; kc < DH / 16; ++kc) load_a(qf[kc], Qs, LD, 16 * warp, 16 * kc);
    }
    if (kt < last) {
      const int nb = int(kt + 1) & 1;
      load_tile<DH, kTile>(Ks + nb * kTile * LD, kbase + (k0 + kTile) * ld, ld, S - k0 - kTile);
      load_tile<DH, kTile>(Vs + nb * kTile * LD, vbase + (k0 + kTile) * ld, ld, S - k0 - kTile);
      cp_commit();
    }
    if (k0 > w0 + 15) continue;  // above the diagonal for all 16 rows: never visited
    const bf* K = Ks + (kt & 1) * kTile * LD;
    const bf* V = Vs + (kt & 1) * kTile * LD;
    float s[8][4] = {};
    {
      const int l = threadIdx.x % 32;
      const bf* bp = K + ((l & 7) + 8 * (l >> 4)) * LD + 8 * ((l >> 3) & 1);
#pragma unroll
      for (int kc = 0; kc < DH / 16; ++kc)
#pragma unroll
        for (int np = 0; np < 4; ++np) {
          u32 bb[4];
          ldsm(bb, bp + 16 * np * LD + 16 * kc);
          mma(s[2 * np], qf[kc], bb[0], bb[1]);
          mma(s[2 * np + 1], qf[kc], bb[2], bb[3]);
        }
    }
    if (k0 + kTile - 1 > w0) {  // crosses the diagonal (rows ≥ S need no mask: never written)
#pragma unroll
      for (int n = 0; n < 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          if (k0 + c_col(n, e) > row[e / 2]) s[n][e] = -INFINITY;
    }
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) mx[e / 2] = fmaxf(mx[e / 2], s[n][e]);
    float alpha[2], nm[2], sum[2] = {0, 0};
#pragma unroll
    for (int r = 0; r < 2; ++r) {  // the quad of lanes 4g.. holds row g's 64 columns
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
      const float m_new = fmaxf(m[r], mx[r] * sl2e);  // finite: key k0 ≤ every row of a visited tile
      alpha[r] = exp2f(m[r] - m_new);
      m[r] = m_new;
      nm[r] = -m_new;
    }
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) sum[e / 2] += (s[n][e] = exp2f(fmaf(s[n][e], sl2e, nm[e / 2])));
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
    mma_regs_kmajor<DH / 8>(o, s, V, LD);
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const long i = row[r];
    if (i >= S) continue;
    bf* dst = out + (q * S + i) * hy + h * DH + 2 * t;
    const float inv = 1.0f / l[r];
#pragma unroll
    for (int n = 0; n < DH / 8; ++n)
      *reinterpret_cast<__nv_bfloat162*>(dst + 8 * n) = __floats2bfloat162_rn(o[n][2 * r] * inv, o[n][2 * r + 1] * inv);
    if (t == 0) lse[(q * heads + h) * S + i] = (m[r] + log2f(l[r])) * kLn2;
  }
}

template <int DH>
constexpr size_t backward_kv_smem() {
  return size_t(2 * kRows + 4 * kTile) * kLd<DH> * sizeof(bf) + 4 * kTile * sizeof(float);
}

// dK and dV of 128 keys (16 a warp) of KV head b: one block per (key block,
// KV head, sequence), over the group's query heads in order and, for each,
// the 64-query tiles from the block's diagonal on, streamed with their lse
// and δ. Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ put the warp's keys in C rows, so Pᵀ and
// dSᵀ are A fragments for dV += Pᵀ·dO, dK += dSᵀ·Q.
template <int DH>
__global__ void __launch_bounds__(kThreads, 1)
    flash_backward_kv_tc(const bf* qkv, const float* lse, const float* delta, const bf* dout, bf* dqkv, long S,
                         long heads, long kv) {
  constexpr int LD = kLd<DH>;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  bf* Ks = reinterpret_cast<bf*>(smem_raw);  // [128][LD] each
  bf* Vs = Ks + kRows * LD;
  bf* Qs = Vs + kRows * LD;  // [2][64][LD] each
  bf* dOs = Qs + 2 * kTile * LD;
  float* lse_s = reinterpret_cast<float*>(dOs + 2 * kTile * LD);  // [2][64] each
  float* delta_s = lse_s + 2 * kTile;
  const int warp = threadIdx.x / 32, g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
  const long q = blockIdx.z, b = blockIdx.y, k0 = long(blockIdx.x) * kRows;
  const long ld = (heads + 2 * kv) * DH, hy = heads * DH, group = heads / kv, tiles = (S + kTile - 1) / kTile;
  const long it0 = k0 / kTile, per = tiles - it0, count = group * per;  // query tiles per head, in all
  const bf* base = qkv + q * S * ld;
  const float scale = 1.0f / sqrtf(float(DH)), sl2e = scale * kLog2e;
  const long w0 = k0 + 16 * warp;  // the warp's first key
  load_tile<DH, kRows>(Ks, base + k0 * ld + hy + b * DH, ld, S - k0);
  load_tile<DH, kRows>(Vs, base + k0 * ld + hy + (kv + b) * DH, ld, S - k0);
  // Query tile n (head b·group + n / per, tile it0 + n % per) into buffer n % 2.
  const auto issue = [&](long n) {
    const long h = b * group + n / per, i0 = (it0 + n % per) * kTile;
    const int nb = int(n & 1);
    load_tile<DH, kTile>(Qs + nb * kTile * LD, base + i0 * ld + h * DH, ld, S - i0);
    load_tile<DH, kTile>(dOs + nb * kTile * LD, dout + (q * S + i0) * hy + h * DH, hy, S - i0);
    if (threadIdx.x < kTile) {
      const long i = i0 + threadIdx.x, at = (q * heads + h) * S + (i < S ? i : i0);
      cp_async4(lse_s + nb * kTile + threadIdx.x, lse + at, i < S);
      cp_async4(delta_s + nb * kTile + threadIdx.x, delta + at, i < S);
    }
    cp_commit();
  };
  issue(0);
  const long key[2] = {w0 + g, w0 + g + 8};
  float dk[DH / 8][4] = {}, dv[DH / 8][4] = {};
  for (long n = 0; n < count; ++n) {
    cp_wait_all();
    __syncthreads();  // tile n in; tile n − 1's buffers read by every warp
    if (n + 1 < count) issue(n + 1);
    const long i0 = (it0 + n % per) * kTile;
    if (i0 + kTile - 1 < w0) continue;  // every query before every key of the warp
    const int nb = int(n & 1);
    const bf* Q = Qs + nb * kTile * LD;
    const bf* dO = dOs + nb * kTile * LD;
    const float* ls = lse_s + nb * kTile;
    const float* ds_ = delta_s + nb * kTile;
    float p[8][4] = {};
    mma_ab_nmajor<DH / 16>(p, Ks, 16 * warp, Q, LD);  // Sᵀ
    if (i0 < w0 + 15 || i0 + kTile > S) {  // crosses the diagonal, or the last queries are past S
#pragma unroll
      for (int n8 = 0; n8 < 8; ++n8)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int c = c_col(n8, e);
          const long i = i0 + c;
          p[n8][e] = i >= key[e / 2] && i < S ? exp2f(fmaf(p[n8][e], sl2e, -ls[c] * kLog2e)) : 0.0f;
        }
    } else {
#pragma unroll
      for (int n8 = 0; n8 < 8; ++n8)
#pragma unroll
        for (int e = 0; e < 4; ++e) p[n8][e] = exp2f(fmaf(p[n8][e], sl2e, -ls[c_col(n8, e)] * kLog2e));
    }
    mma_regs_kmajor<DH / 8>(dv, p, dO, LD);  // Pᵀ·dO
    float ds[8][4] = {};
    mma_ab_nmajor<DH / 16>(ds, Vs, 16 * warp, dO, LD);  // dPᵀ
#pragma unroll
    for (int n8 = 0; n8 < 8; ++n8)
#pragma unroll
      for (int e = 0; e < 4; ++e) ds[n8][e] = p[n8][e] * (ds[n8][e] - ds_[c_col(n8, e)]) * scale;
    mma_regs_kmajor<DH / 8>(dk, ds, Q, LD);  // dSᵀ·Q
  }
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
  return size_t(2 * kRows + 4 * kTile) * kLd<DH> * sizeof(bf);
}

// dQ of 128 queries (16 a warp) of query head h, over the key tiles to the
// diagonal, K and V double-buffered: S = Q·Kᵀ, dP = dO·Vᵀ, then dQ += dS·K.
template <int DH>
__global__ void __launch_bounds__(kThreads, 1)
    flash_backward_q_tc(const bf* qkv, const float* lse, const float* delta, const bf* dout, bf* dqkv, long S,
                        long heads, long kv) {
  constexpr int LD = kLd<DH>;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  bf* Qs = reinterpret_cast<bf*>(smem_raw);  // [128][LD] each
  bf* dOs = Qs + kRows * LD;
  bf* Ks = dOs + kRows * LD;  // [2][64][LD] each
  bf* Vs = Ks + 2 * kTile * LD;
  const int warp = threadIdx.x / 32, g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
  const long q = blockIdx.z, h = blockIdx.y, q0 = long(gridDim.x - 1 - blockIdx.x) * kRows;  // long rows first
  const long ld = (heads + 2 * kv) * DH, hy = heads * DH, b = h / (heads / kv);
  const bf* base = qkv + q * S * ld;
  const bf* kbase = base + hy + b * DH;
  const bf* vbase = base + hy + (kv + b) * DH;
  const float scale = 1.0f / sqrtf(float(DH)), sl2e = scale * kLog2e;
  const long w0 = q0 + 16 * warp;
  const long last = min(q0 + kRows - 1, S - 1) / kTile;
  load_tile<DH, kRows>(Qs, base + q0 * ld + h * DH, ld, S - q0);
  load_tile<DH, kRows>(dOs, dout + (q * S + q0) * hy + h * DH, hy, S - q0);
  load_tile<DH, kTile>(Ks, kbase, ld, S);
  load_tile<DH, kTile>(Vs, vbase, ld, S);
  cp_commit();
  const long row[2] = {w0 + g, w0 + g + 8};
  float nlse[2], row_delta[2];  // −lse in log2 units
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    nlse[r] = row[r] < S ? -lse[(q * heads + h) * S + row[r]] * kLog2e : 0.0f;
    row_delta[r] = row[r] < S ? delta[(q * heads + h) * S + row[r]] : 0.0f;
  }
  float dq[DH / 8][4] = {};
  for (long kt = 0; kt <= last; ++kt) {
    const long k0 = kt * kTile;
    cp_wait_all();
    __syncthreads();  // tile kt in; tile kt − 1's buffers read by every warp
    if (kt < last) {
      const int nb = int(kt + 1) & 1;
      load_tile<DH, kTile>(Ks + nb * kTile * LD, kbase + (k0 + kTile) * ld, ld, S - k0 - kTile);
      load_tile<DH, kTile>(Vs + nb * kTile * LD, vbase + (k0 + kTile) * ld, ld, S - k0 - kTile);
      cp_commit();
    }
    if (k0 > w0 + 15) continue;  // above the diagonal for all 16 rows
    const bf* K = Ks + (kt & 1) * kTile * LD;
    const bf* V = Vs + (kt & 1) * kTile * LD;
    float p[8][4] = {}, ds[8][4] = {};
    mma_ab_nmajor<DH / 16>(p, Qs, 16 * warp, K, LD);    // S
    mma_ab_nmajor<DH / 16>(ds, dOs, 16 * warp, V, LD);  // dP
    const bool diagonal = k0 + kTile - 1 > w0;  // rows < S see keys < S only
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float pe = exp2f(fmaf(p[n][e], sl2e, nlse[e / 2]));
        if (diagonal && k0 + c_col(n, e) > row[e / 2]) pe = 0.0f;
        ds[n][e] = pe * (ds[n][e] - row_delta[e / 2]) * scale;
      }
    mma_regs_kmajor<DH / 8>(dq, ds, K, LD);  // dS·K
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
  const dim3 grid(unsigned((S + tc::kRows - 1) / tc::kRows), unsigned(heads), unsigned(seqs));
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
  const unsigned tiles = unsigned((S + tc::kRows - 1) / tc::kRows);  // key blocks, then query blocks
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
