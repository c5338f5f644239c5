#pragma once
#include <vector>

namespace ff {

struct BundledProfile {
  const char* name;
  const char* json;
};

// profiles/*.json as compiled in, the default machine first.
const std::vector<BundledProfile>& bundled_profiles();

}  // namespace ff
