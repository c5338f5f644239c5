#pragma once
// Compute time: GEMMs at the profile's rate or from its efficiency table,
// attention at the profile's flash-attention efficiency, memory-bound
// kernels by their traffic and launches.
#include "advisor/core/machine_profile.hpp"

namespace ff {

// Efficiency of an m×k by k×n GEMM, interpolated in log2 of each dimension.
double gemm_efficiency(const GemmTable& t, double m, double n, double k);
// At gemm_rate for bf16 and fp16 where the profile has one, else the table.
double gemm_time(const MachineProfile& p, Dtype dt, double m, double n, double k);
double attention_time(const MachineProfile& p, Dtype dt, double flops);
// Causal flash attention over sequences of `seq` tokens with heads of
// `head_dim`: at the profile's flash_attention curves where it has them (bf16
// and fp16; between two head sizes interpolated in log2 of the size, beyond
// them the nearest), else at attention_efficiency. `flops` forward or
// backward alike: the curves are of both together.
double flash_attention_time(const MachineProfile& p, Dtype dt, double flops, double seq, double head_dim);
// The efficiency flash_attention_time prices at (of the dtype's peak).
double flash_attention_efficiency(const MachineProfile& p, Dtype dt, double seq, double head_dim);
// Memory-bound kernels of a class moving `bytes` in all, in `launches`
// launches: at the class's measured efficiency and cost a launch where the
// profile has them.
double elementwise_time(const MachineProfile& p, KernelClass cls, double bytes, double launches);

}  // namespace ff
