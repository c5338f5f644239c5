#pragma once
// bfloat16 on the host: the storage of the bf16 training dtype (weights,
// activations, messages), computed in float. Rounding to nearest even, as
// the GPU's __float2bfloat16_rn, so the cpu's kernels stay the GPU's twins.
// Arithmetic on two bf16 values converts both to float; nothing is computed
// in bf16. A plain 16-bit value, the layout of CUDA's __nv_bfloat16.
#include <bit>
#include <cstdint>

namespace ff::engine {

struct bf16 {
  uint16_t bits = 0;

  bf16() = default;
  bf16(float f) : bits(round(f)) {}  // implicit, as T(0) and T(x) are in the templates
  operator float() const { return std::bit_cast<float>(uint32_t(bits) << 16); }

  // float's top 16 bits, rounded to nearest even on the 16 below; NaN stays
  // a (quiet) NaN instead of rounding into infinity.
  static constexpr uint16_t round(float f) {
    const uint32_t u = std::bit_cast<uint32_t>(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x0040u);
    return uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  }
};
static_assert(sizeof(bf16) == 2);

// Where a training dtype keeps what must not be rounded to it (MODEL.md §1
// "Precision", §2's memory terms): master weights, gradient accumulators, Adam's
// moments and the LayerNorm and cross-entropy statistics. fp32 and fp64 keep
// them in themselves (the weight is the master); bf16 in fp32.
template <typename T>
struct Master {
  using type = T;
};
template <>
struct Master<bf16> {
  using type = float;
};
template <typename T>
using master_t = typename Master<T>::type;

}  // namespace ff::engine
