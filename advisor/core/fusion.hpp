#pragma once
// How much of a block's memory-bound work the training framework fuses
// (MODEL.md §2, "Kernels"): a property of the job, as its dtype is.
#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

namespace ff {

//   unfused  PyTorch eager without epilogues: every bias its own add and
//            column-sum kernel, GELU, residual adds and LayerNorm alone.
//   fused    Megatron-LM with Transformer Engine: biases in the GEMM
//            epilogues both ways, bias+GELU and bias+residual one pass each.
//   engine   this project's engine: the fused level's bytes (what its
//            device charges) in the launches it really makes.
enum class Fusion : uint8_t { Unfused, Fused, Engine };
inline constexpr std::array<Fusion, 3> kFusions = {Fusion::Unfused, Fusion::Fused, Fusion::Engine};
const char* fusion_name(Fusion f);
std::optional<Fusion> parse_fusion(std::string_view s);

}  // namespace ff
