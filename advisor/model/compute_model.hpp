#pragma once
// Compute time: GEMMs from the profile's efficiency table, attention at the
// profile's flash-attention efficiency, element-wise work by memory traffic.
#include "advisor/core/machine_profile.hpp"

namespace ff {

// Efficiency of an m×k by k×n GEMM, interpolated in log2 of each dimension.
double gemm_efficiency(const GemmTable& t, double m, double n, double k);
double gemm_time(const MachineProfile& p, Dtype dt, double m, double n, double k);
double attention_time(const MachineProfile& p, Dtype dt, double flops);
double elementwise_time(const MachineProfile& p, double bytes);

}  // namespace ff
