#pragma once
// The paced device (MODEL.md §11, "tc for compute"): each engine rank computes
// on the host and completes every kernel on a virtual device clock, its
// duration from this description. The engine paces with it; the advisor
// prices a validation with the same description in place of the profile's
// compute sections, so compute is known by construction and the model is
// scored on what it exists for: communication, placement and overlap.
#include <string>

#include <nlohmann/json.hpp>

namespace ff {

// The default pace, in the flags' units, chosen so that 8 ranks on 2 cores
// keep the host's real work well below the paced time (engine/README.md has
// the measurement). The host link is a fifth of the element-wise rate: on
// GPUs it is 60 times slower than memory, which would leave an offloaded
// step nothing but copies.
inline constexpr double kDefaultPaceGflops = 2, kDefaultPaceGbps = 0.5, kDefaultPollUs = 50,
                        kDefaultPaceHostGbps = 0.1;

struct DevicePace {
  double gemm_flops = 0;   // FLOP/s of every fp32 GEMM, any shape (fp64: half)
  double bytes_per_s = 0;  // element-wise kernels' memory traffic
  double poll_s = 0;       // Δ: MPI waits are MPI_Test + sleep Δ (measure times with the same)
  // Offload's copies, each way, both ways at once: a copy engine per way.
  double host_bytes_per_s = kDefaultPaceHostGbps * 1e9;
  bool operator==(const DevicePace&) const = default;
};
// fp32 or fp64 GEMM rate: a host computes fp64 at about half its fp32 rate.
double pace_gemm_flops(const DevicePace& p, bool fp64);
std::string pace_label(const DevicePace& p);  // "2 GFLOP/s, 0.5 GB/s, poll 50 us, host 0.1 GB/s"
// A pace figure converted between units as a person wrote it (12 significant
// digits): 50 µs → 5e-5 s → 50 µs again, not 49.99999999999999, so launch
// lines and reports say what was given.
double as_written(double v);

// `profile` (a machine profile's JSON) with its compute described by the pace:
// peak = GEMM rate with a flat GEMM table, attention at the same rate,
// element-wise at bytes_per_s, the host link at host_bytes_per_s each way
// (every GPU of a node alike), and overlap efficiency 1 (the device computes
// while its rank drives MPI in the sleeps). Links, memory capacity and the
// rest stay as measured; "paced_device" records the pace.
nlohmann::json paced_profile_json(nlohmann::json profile, const DevicePace& p);

}  // namespace ff
