#include "advisor/calibration/elementwise_fit.hpp"

#include <algorithm>
#include <cmath>

#include "advisor/model/prediction.hpp"

namespace ff {

namespace {

double one_rank_compute(MachineProfile p, double efficiency, const EngineStepSample& s) {
  p.elementwise_efficiency = efficiency;
  Job job{s.model, 1, s.micro_batch, Dtype::FP32};
  Config c{Grid{}, Order{}, s.micro_batch, Recompute::None, Overlap{}, Dtype::FP32};
  return predict_estimate(job, p, c).compute_s;
}

}  // namespace

ElementwiseFit fit_elementwise(const MachineProfile& p, const std::vector<EngineStepSample>& samples) {
  ElementwiseFit f;
  double bb = 0, bm = 0;  // Σ B², Σ B·(M − A)
  std::vector<double> a, b;
  for (const auto& s : samples) {
    if (s.compute_s.size() < 2) continue;  // nothing after the warm-up step
    double m = median(std::vector<double>(s.compute_s.begin() + 1, s.compute_s.end()));
    double at1 = one_rank_compute(p, 1.0, s), at_half = one_rank_compute(p, 0.5, s);
    double B = at_half - at1, A = at1 - B;
    f.measured_s += m;
    a.push_back(A), b.push_back(B);
    bb += B * B, bm += B * (m - A);
  }
  if (a.empty()) {
    f.why = "no engine step with more than the warm-up step";
    return f;
  }
  if (!(bb > 0) || !(bm > 0)) {
    f.why = "the measured steps are no slower than the model's GEMM and attention time alone, so they leave "
            "nothing to element-wise work";
    return f;
  }
  double e = bb / bm;  // u = 1/e = Σ B(M − A) / Σ B²
  f.clamped = e < 1e-3 || e > 1;
  f.efficiency = std::clamp(e, 1e-3, 1.0);
  for (size_t i = 0; i < a.size(); ++i) f.predicted_s += a[i] + b[i] / f.efficiency;
  f.ok = true;
  return f;
}

}  // namespace ff
