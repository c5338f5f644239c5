#pragma once
#include <cstddef>

namespace ff::measure {

// Memory bandwidth per rank with every rank running at once: STREAM's triad
// a[i] = b[i] + s·c[i] over `doubles` elements an array, counted as 3 arrays
// of traffic (no write-allocate), until the last rank is done, median of `repeats`. Bytes/s.
double measure_stream(size_t doubles, int repeats);

// The GPU's memory bandwidth per rank with every rank running: a
// device-to-device cudaMemcpy of `bytes`, counted as read plus write (2 ×
// bytes), until the last rank is done, median of `repeats`. 0 in builds
// without CUDA.
double measure_device_copy(size_t bytes, int repeats);

}  // namespace ff::measure
