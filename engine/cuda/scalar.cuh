#pragma once
// The training dtype T in device code: every kernel loads T into M =
// master_t<T>, computes in M and rounds only where it stores a T, as the
// cpu's twins do. engine::bf16's conversions are host functions, so a bf16
// is read and written as CUDA's __nv_bfloat16 (the same 16 bits), rounding
// to nearest even as bf16.hpp does. For float and double both are plain
// reads and writes: their kernels compute what they computed before bf16.
#include <cuda_bf16.h>

#include <cstdint>
#include <initializer_list>

#include "engine/runtime/bf16.hpp"

namespace ff::cuda {

using engine::bf16;
using engine::master_t;

template <typename T>
__device__ inline T load(const T* p) {
  return *p;
}
__device__ inline float load(const bf16* p) { return __bfloat162float(*reinterpret_cast<const __nv_bfloat16*>(p)); }

template <typename T>
__device__ inline void store(T* p, T v) {
  *p = v;
}
__device__ inline void store(bf16* p, float v) { *reinterpret_cast<__nv_bfloat16*>(p) = __float2bfloat16_rn(v); }

// Element-wise kernels move 16 bytes a thread (8 bf16, 4 float, 2 double):
// one scalar bf16 load a thread leaves a memory-bound kernel at about half
// the bandwidth. kPack<T> values of T per thread; an array of M beside them
// (a master accumulator) is read and written as whole 16-byte chunks too.
template <typename T>
inline constexpr int kPack = 16 / int(sizeof(T));

// The 16/sizeof(S) values of S at p (16-byte aligned) into out, as M.
template <typename S, typename M>
__device__ inline void load16(const S* p, M* out) {
  if constexpr (sizeof(S) == 2) {
    const uint4 u = *reinterpret_cast<const uint4*>(p);
    const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&u);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const float2 f = __bfloat1622float2(h[k]);
      out[2 * k] = f.x, out[2 * k + 1] = f.y;
    }
  } else {
    struct alignas(16) Chunk {
      S v[16 / sizeof(S)];
    };
    const Chunk c = *reinterpret_cast<const Chunk*>(p);
#pragma unroll
    for (int k = 0; k < int(16 / sizeof(S)); ++k) out[k] = c.v[k];
  }
}
template <typename S, typename M>
__device__ inline void store16(S* p, const M* in) {
  if constexpr (sizeof(S) == 2) {
    uint4 u;
    __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&u);
#pragma unroll
    for (int k = 0; k < 4; ++k) h[k] = __floats2bfloat162_rn(float(in[2 * k]), float(in[2 * k + 1]));
    *reinterpret_cast<uint4*>(p) = u;
  } else {
    struct alignas(16) Chunk {
      S v[16 / sizeof(S)];
    };
    Chunk c;
#pragma unroll
    for (int k = 0; k < int(16 / sizeof(S)); ++k) c.v[k] = S(in[k]);
    *reinterpret_cast<Chunk*>(p) = c;
  }
}

// The first `count` of W values of S at p into out (as M), the rest 0:
// whole 16-byte chunks where `vec` (count = W, p aligned), else one by one.
// Every index is a constant of an unrolled loop, so the W values stay in
// registers (an index known only at run time puts an array in local memory).
template <int W, typename S, typename M>
__device__ inline void load_pack(const S* p, M (&out)[W], int count, bool vec) {
  if (vec) {
#pragma unroll
    for (int c = 0; c < W; c += int(16 / sizeof(S))) load16(p + c, out + c);
  } else {
#pragma unroll
    for (int k = 0; k < W; ++k) out[k] = k < count ? M(load(p + k)) : M(0);
  }
}
template <int W, typename S, typename M>
__device__ inline void store_pack(S* p, const M (&in)[W], int count, bool vec) {
  if (vec) {
#pragma unroll
    for (int c = 0; c < W; c += int(16 / sizeof(S))) store16(p + c, in + c);
  } else {
#pragma unroll
    for (int k = 0; k < W; ++k) {
      if (k >= count) break;
      if constexpr (sizeof(S) == 2) store(p + k, float(in[k]));
      else store(p + k, S(in[k]));
    }
  }
}

// A thread's kPack<T> values from index i0 (a multiple of kPack<T>): how
// many are left, and whether they are one aligned chunk of every array.
template <typename T>
struct Pack {
  size_t i0;
  int count;
  bool vec;
  __device__ Pack(size_t n, bool aligned) : i0((size_t(blockIdx.x) * blockDim.x + threadIdx.x) * kPack<T>) {
    count = i0 >= n ? 0 : n - i0 < size_t(kPack<T>) ? int(n - i0) : kPack<T>;
    vec = aligned && count == kPack<T>;
  }
};
// Whether every pointer is 16-byte aligned: then a thread's kPack values,
// starting at a multiple of kPack, are one aligned chunk of each array.
inline bool aligned16(std::initializer_list<const void*> ps) {
  for (const void* p : ps)
    if (reinterpret_cast<std::uintptr_t>(p) % 16) return false;
  return true;
}

}  // namespace ff::cuda
