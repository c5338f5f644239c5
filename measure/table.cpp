#include "measure/table.hpp"

#include <algorithm>
#include <cstdio>

#include "advisor/core/measurement.hpp"

namespace ff::measure {

void print_table(const std::vector<TableRow>& rows) {
  std::string last;
  for (const auto& r : rows) {
    if (r.head != last) {
      std::printf("\n# %s  (%s, %d iterations a repeat, %zu repeats)\n", r.head.c_str(), r.at_once.c_str(), r.iters,
                  r.times_s.size());
      std::printf("# %12s %11s %11s %11s %11s %9s %9s %11s %11s %11s\n", "size(B)", "count", "time(us)", "min(us)",
                  "max(us)", "algbw", "busbw", "iter min", "iter med", "iter max");
      std::printf("# %12s %11s %11s %11s %11s %9s %9s %11s %11s %11s\n", "", "(floats)", "median", "repeats",
                  "repeats", "(GB/s)", "(GB/s)", "(us)", "(us)", "(us)");
      last = r.head;
    }
    double t = ff::median(r.times_s), algbw = r.bytes / t / 1e9;
    auto [lo, hi] = std::minmax_element(r.iterations.begin(), r.iterations.end());
    auto [rlo, rhi] = std::minmax_element(r.times_s.begin(), r.times_s.end());
    std::printf("  %12.0f %11zu %11.2f %11.2f %11.2f %9.3f %9.3f %11.2f %11.2f %11.2f\n", r.bytes, r.count, t * 1e6,
                *rlo * 1e6, *rhi * 1e6, algbw, algbw * r.busbw_factor, *lo * 1e6, ff::median(r.iterations) * 1e6,
                *hi * 1e6);
  }
  std::fflush(stdout);
}

}  // namespace ff::measure
