#pragma once
// CUDA_CHECK / NCCL_CHECK: as MPI_CHECK, for the CUDA runtime, cuBLAS and NCCL.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <string>

#include "engine/runtime/fatal.hpp"  // FF_FATAL, without MPI: nvcc compiles it too

#define CUDA_CHECK(call)                                                              \
  do {                                                                                \
    cudaError_t cuda_err_ = (call);                                                   \
    if (cuda_err_ != cudaSuccess) FF_FATAL(std::string(#call) + ": " + cudaGetErrorString(cuda_err_)); \
  } while (0)

#define NCCL_CHECK(call)                                                              \
  do {                                                                                \
    ncclResult_t nccl_err_ = (call);                                                  \
    if (nccl_err_ != ncclSuccess) FF_FATAL(std::string(#call) + ": " + ncclGetErrorString(nccl_err_)); \
  } while (0)

#define CUBLAS_CHECK(call)                                                            \
  do {                                                                                \
    cublasStatus_t cublas_err_ = (call);                                              \
    if (cublas_err_ != CUBLAS_STATUS_SUCCESS)                                         \
      FF_FATAL(std::string(#call) + ": cuBLAS status " + std::to_string(int(cublas_err_))); \
  } while (0)
