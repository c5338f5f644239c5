#include "advisor/model/compute_model.hpp"

#include <algorithm>
#include <cmath>

namespace ff {

namespace {

// Index i and weight w such that log2(v) lies between axis[i] and axis[i+1].
void bracket(const std::vector<double>& axis, double v, size_t& i, double& w) {
  if (axis.size() == 1 || v <= axis.front()) {
    i = 0, w = 0;
    return;
  }
  if (v >= axis.back()) {
    i = axis.size() - 2, w = 1;
    return;
  }
  i = static_cast<size_t>(std::upper_bound(axis.begin(), axis.end(), v) - axis.begin()) - 1;
  w = std::log2(v / axis[i]) / std::log2(axis[i + 1] / axis[i]);
}

}  // namespace

double gemm_efficiency(const GemmTable& t, double m, double n, double k) {
  size_t im, in, ik;
  double wm, wn, wk;
  bracket(t.m, m, im, wm);
  bracket(t.n, n, in, wn);
  bracket(t.k, k, ik, wk);
  size_t Nn = t.n.size(), Nk = t.k.size();
  auto at = [&](size_t a, size_t b, size_t c) {
    a = std::min(a, t.m.size() - 1), b = std::min(b, Nn - 1), c = std::min(c, Nk - 1);
    return t.eff[(a * Nn + b) * Nk + c];
  };
  double e = 0;
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 2; ++b)
      for (int c = 0; c < 2; ++c)
        e += (a ? wm : 1 - wm) * (b ? wn : 1 - wn) * (c ? wk : 1 - wk) * at(im + a, in + b, ik + c);
  return e;
}

double gemm_time(const MachineProfile& p, Dtype dt, double m, double n, double k) {
  if (m <= 0 || n <= 0 || k <= 0) return 0;
  if (dt != Dtype::FP32 && p.gemm_rate.efficiency_max > 0)
    return 2 * m * n * k / (p.peak_flops(dt) * p.gemm_rate.efficiency_max) + p.gemm_rate.fixed_s;
  return 2 * m * n * k / (p.peak_flops(dt) * gemm_efficiency(p.gemm(dt), m, n, k));
}

double attention_time(const MachineProfile& p, Dtype dt, double flops) {
  return flops / (p.peak_flops(dt) * p.attention_efficiency);
}

double flash_attention_efficiency(const MachineProfile& p, Dtype dt, double seq, double head_dim) {
  const AttentionCurve *lo = nullptr, *hi = nullptr;  // the causal curves around head_dim
  if (dt != Dtype::FP32)
    for (const AttentionCurve& c : p.flash_attention) {
      if (!c.causal) continue;
      if (c.head_dim <= head_dim && (!lo || c.head_dim > lo->head_dim)) lo = &c;
      if (c.head_dim >= head_dim && (!hi || c.head_dim < hi->head_dim)) hi = &c;
    }
  if (!lo && !hi) return p.attention_efficiency;
  auto at = [&](const AttentionCurve* c) { return c->efficiency_max * seq / (seq + c->half_seq); };
  if (!lo) return at(hi);
  if (!hi || hi == lo) return at(lo);
  const double w = std::log2(head_dim / lo->head_dim) / std::log2(double(hi->head_dim) / lo->head_dim);
  return (1 - w) * at(lo) + w * at(hi);
}

double flash_attention_time(const MachineProfile& p, Dtype dt, double flops, double seq, double head_dim) {
  return flops / (p.peak_flops(dt) * flash_attention_efficiency(p, dt, seq, head_dim));
}

double elementwise_time(const MachineProfile& p, KernelClass cls, double bytes, double launches) {
  const double own = p.elementwise_by_class[size_t(cls)], launch = p.launch_by_class_s[size_t(cls)];
  return bytes / (p.hbm_bandwidth * (own > 0 ? own : p.elementwise_efficiency)) +
         launches * (launch >= 0 ? launch : p.launch_s);
}

}  // namespace ff
