#include "measure/stream.hpp"

#include <mpi.h>

#include <algorithm>
#include <vector>

#include "engine/runtime/check.hpp"
#include "measure/harness.hpp"

namespace ff::measure {

double measure_stream(size_t doubles, int repeats) {
  std::vector<double> a(doubles, 0.0), b(doubles, 1.0), c(doubles, 2.0);
  const double s = 3.0;
  auto triad = [&] {
    for (size_t i = 0; i < doubles; ++i) a[i] = b[i] + s * c[i];
  };
  triad();  // warm-up
  std::vector<double> times;
  for (int rep = 0; rep < repeats; ++rep) {
    times.push_back(time_all_ranks(triad));
  }
  // Keep the compiler from dropping the loop: a[] is read once.
  volatile double sink = a[doubles / 2];
  (void)sink;
  std::sort(times.begin(), times.end());
  return 3.0 * sizeof(double) * double(doubles) / times[times.size() / 2];
}

}  // namespace ff::measure
