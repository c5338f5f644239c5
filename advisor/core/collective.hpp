#pragma once
// The collectives the parts speak of (the advisor prices them, measure times
// them, the engine issues them) and the ring arithmetic all three share.
#include <cstdint>
#include <vector>

namespace ff {

enum class Coll : uint8_t { AllReduce, AllGather, ReduceScatter };
const char* coll_name(Coll c);  // "all-reduce", "all-gather", "reduce-scatter"

// Ring steps: 2(g − 1) for an all-reduce, g − 1 for the others.
inline double ring_steps(Coll c, int g) { return c == Coll::AllReduce ? 2.0 * (g - 1) : double(g - 1); }

// A measured curve's time t scaled as a link is (scale_link): its first
// `latency` seconds (α·steps of the fit) by the latency factor, the rest by
// the bandwidth's. The advisor prices with it; a refitted profile's curves
// are rewritten with it.
inline double scaled_curve_time(double t, double latency, double alpha_factor, double bw_factor) {
  const double lat = t < latency ? t : latency;
  return lat * alpha_factor + (t - lat) / bw_factor;
}

// Times measured at ascending sizes as pricing takes them: each no more than
// any larger size's, since a smaller message can always be sent padded to
// the larger one. Without it, one slow sample at the smallest size would
// price every message below it (MODEL.md §2).
std::vector<double> padded_times(std::vector<double> t);

}  // namespace ff
