#pragma once
// GEMM throughput with every rank of the node running the same shape at once
// (a lone rank would see the whole node's memory bandwidth and turbo budget).
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "advisor/core/measurement.hpp"
#include "advisor/core/model_spec.hpp"

namespace ff::measure {

struct GemmShape {
  long long m, n, k;
  std::string layout;  // "nn" forward, "nt" input gradient, "tn" weight gradient
};

// The efficiency table's log2 grid: every (m, n, k) from `dims`, layout nn.
std::vector<GemmShape> grid_gemm_shapes(const std::vector<long long>& dims);

// The GEMMs the advisor prices for `model` on tensor-parallel sizes (G_x, G_y)
// with t = micro_batch · seq_len tokens a rank: for each block linear layer
// and the LM head, forward (t, n/·, k/·) nn, input gradient (t, k/·, n/·) nt,
// weight gradient (k/·, n/·, t) tn — as cost_model.cpp calls gemm_time.
std::vector<GemmShape> model_gemm_shapes(const ff::ModelSpec& model, const std::vector<std::pair<int, int>>& xy,
                                         int micro_batch);

// Progress callback: (shapes done, shapes total, the sample just finished).
using GemmProgress = std::function<void(int, int, const ff::GemmSample&)>;

// The sweep both paths share: repeats outermost, so each shape's repeats are
// spread over the run; `seconds_per_call` times one shape with every rank at
// once and returns the same value on every rank.
std::vector<ff::GemmSample> sweep_gemm(const std::vector<GemmShape>& shapes, int repeats, const GemmProgress& progress,
                                       const std::function<double(const GemmShape&)>& seconds_per_call);

// CPU BLAS (cblas_sgemm, fp32). Repeats are interleaved across shapes; each
// timing runs from a world barrier until the last rank is done
// (time_all_ranks).
std::vector<ff::GemmSample> measure_gemm_cpu(const std::vector<GemmShape>& shapes, int repeats,
                                             const GemmProgress& progress);
// cuBLAS (cublasGemmEx, bf16 in, fp32 accumulate), one GPU per local rank.
// Only in CUDA builds; elsewhere returns no samples.
std::vector<ff::GemmSample> measure_gemm_cuda(const std::vector<GemmShape>& shapes, int repeats,
                                              const GemmProgress& progress);

// Calls of one shape per timing: at least `target_flops` of work, so the
// clock and the barriers are noise; the same on every rank.
int gemm_calls(const GemmShape& s, double target_flops);
double best_gemm_rate(const std::vector<ff::GemmSample>& samples);  // FLOP/s per rank

}  // namespace ff::measure
