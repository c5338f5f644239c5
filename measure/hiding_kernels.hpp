#pragma once
// The blocks measure's hiding proxy runs beside a GEMM (gpu_kernels.cpp):
// a collective's kernels hold SMs while they run, copying on them (their
// copies are not a copy engine's) or waiting on the network.
#include <cstddef>

#include <cuda_runtime.h>

namespace ff::measure {

// dst = src (n floats, n a multiple of 4) `rounds` times over, on exactly
// `blocks` blocks.
void copy_on_blocks(const float* src, float* dst, size_t n, int blocks, int rounds, cudaStream_t s);
// `blocks` blocks of copy_on_blocks' size that only hold their SMs for
// `cycles` clock cycles, moving nothing.
void hold_blocks(int blocks, long long cycles, cudaStream_t s);

}  // namespace ff::measure
