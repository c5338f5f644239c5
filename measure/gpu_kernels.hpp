#pragma once
// The engine's own kernels timed alone on this rank's GPU (engine/cuda): what
// the advisor prices a GPU step from besides the GEMMs (MODEL.md §2,
// "Kernels"). Flash attention at several sequence lengths (calibrate fits
// its rate curve), the memory-bound kernels of a block at the model's sizes
// (the element-wise efficiency), and a launch right behind another.
#include <vector>

#include "advisor/core/measurement.hpp"
#include "advisor/core/model_spec.hpp"

namespace ff::measure {

// bf16, the model's heads and head size on one GPU (G_y = 1), micro_batch
// sequences of S tokens for each S in `seqs`; `repeats` timings of each.
std::vector<ff::GpuKernelSample> time_gpu_kernels(const ff::ModelSpec& model, int micro_batch,
                                                  const std::vector<double>& seqs, int repeats);
// The model's FC1 GEMM (bf16) alone and beside a copy kernel on each count
// of `blocks` SMs, `repeats` times each: what a collective's kernels in
// flight cost the compute it hides under, by proxy on one GPU.
std::vector<ff::HidingSample> time_hiding(const ff::ModelSpec& model, int micro_batch, const std::vector<int>& blocks,
                                          int repeats);
// Seconds per launch of a one-element kernel, back to back on one stream.
double time_launch(int repeats);

}  // namespace ff::measure
