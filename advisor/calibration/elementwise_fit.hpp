#pragma once
// The element-wise efficiency a measured engine step implies. The model
// prices element-wise work (LayerNorm, GELU, softmax, AdamW) as bytes over
// hbm_bandwidth × elementwise_efficiency; on CPU ranks those loops are bound
// by instructions (exponentials, divisions) and by the ranks' sharing of
// cores, so the efficiency is fitted to the engine's own step instead of
// assumed.
#include <string>
#include <vector>

#include "advisor/core/machine_profile.hpp"
#include "advisor/core/measurement.hpp"

namespace ff {

struct ElementwiseFit {
  bool ok = false;
  double efficiency = 0;  // the fit, clamped to [1e-3, 1]
  bool clamped = false;
  double measured_s = 0;  // compute per step, median after the warm-up step, summed over samples
  double predicted_s = 0; // the model's compute of those steps with the fitted efficiency
  std::string why;        // when !ok
};

// Least squares in 1/efficiency over the samples: each step's predicted
// compute is A + B / efficiency (A: GEMM and attention, B: element-wise at
// efficiency 1) on a one-rank grid of `p`.
ElementwiseFit fit_elementwise(const MachineProfile& p, const std::vector<EngineStepSample>& samples);

}  // namespace ff
