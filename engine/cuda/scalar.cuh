#pragma once
// The training dtype T in device code: every kernel loads T into M =
// master_t<T>, computes in M and rounds only where it stores a T, as the
// cpu's twins do. engine::bf16's conversions are host functions, so a bf16
// is read and written as CUDA's __nv_bfloat16 (the same 16 bits), rounding
// to nearest even as bf16.hpp does. For float and double both are plain
// reads and writes: their kernels compute what they computed before bf16.
#include <cuda_bf16.h>

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

}  // namespace ff::cuda
