#pragma once
// One way to fail under MPI, for the engine and measure/ alike. A failing
// MPI, CUDA, NCCL or cuBLAS call is a broken machine or a bug: the rank says
// where (`fatal`, with file:line) and takes the job down with MPI_Abort rather
// than leave the other ranks waiting in a collective. Every such call is
// wrapped in its *_CHECK macro (the CUDA ones are in cuda_check.hpp, which
// only CUDA-enabled sources include).
//
// Bad input is not this: it is an ff::InputError (error.hpp), found by every
// rank alike before the first collective, reported once, exit 2.
#include <mpi.h>

#include <string>

#include "engine/runtime/fatal.hpp"

#define MPI_CHECK(call)                                              \
  do {                                                               \
    int mpi_check_err_ = (call);                                     \
    if (mpi_check_err_ != MPI_SUCCESS) {                             \
      char mpi_check_msg_[MPI_MAX_ERROR_STRING];                     \
      int mpi_check_len_ = 0;                                        \
      MPI_Error_string(mpi_check_err_, mpi_check_msg_, &mpi_check_len_); \
      FF_FATAL(std::string(#call) + ": " + std::string(mpi_check_msg_, mpi_check_len_)); \
    }                                                                \
  } while (0)
