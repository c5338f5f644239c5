// A build without the engine's GPU kernels (no nvcc): nothing of theirs to time.
#include "measure/gpu_kernels.hpp"

namespace ff::measure {

std::vector<ff::GpuKernelSample> time_gpu_kernels(const ff::ModelSpec&, int, const std::vector<double>&, int) {
  return {};
}
std::vector<ff::HidingSample> time_hiding(const ff::ModelSpec&, int, const std::vector<int>&, int) { return {}; }
double time_launch(int) { return 0; }

}  // namespace ff::measure
