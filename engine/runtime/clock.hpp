#pragma once
#include <chrono>

namespace ff::engine {

// Seconds on the steady clock: the engine's one time base (the paced
// device's clock included, so its events compare with host time).
inline double now_s() {
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

}  // namespace ff::engine
