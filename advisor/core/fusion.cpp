#include "advisor/core/fusion.hpp"

namespace ff {

const char* fusion_name(Fusion f) {
  switch (f) {
    case Fusion::Unfused: return "unfused";
    case Fusion::Fused: return "fused";
    case Fusion::Engine: return "engine";
  }
  return "?";
}

std::optional<Fusion> parse_fusion(std::string_view s) {
  for (Fusion f : kFusions)
    if (s == fusion_name(f)) return f;
  return std::nullopt;
}

}  // namespace ff
