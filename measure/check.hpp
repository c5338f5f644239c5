#pragma once
// One way to fail. Every MPI, CUDA and NCCL call is wrapped in a *_CHECK macro
// that names the call site; a failure there is a broken machine or a bug, so
// the rank prints the reason and takes the job down (MPI_Abort), rather than
// leaving the other ranks waiting in a collective.
//
// Bad input is different: every rank validates the same arguments the same
// way before any collective, throws UsageError, and main() has rank 0 print
// it once while all ranks exit non-zero together (no abort, no hang).
#include <mpi.h>

#include <stdexcept>
#include <string>

namespace meas {

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

[[noreturn]] void fatal(const char* file, int line, const std::string& what);

}  // namespace meas

#define MEAS_FATAL(what) ::meas::fatal(__FILE__, __LINE__, (what))

#define MPI_CHECK(call)                                                    \
  do {                                                                     \
    int mpi_err_ = (call);                                                 \
    if (mpi_err_ != MPI_SUCCESS) {                                         \
      char msg_[MPI_MAX_ERROR_STRING];                                     \
      int len_ = 0;                                                        \
      MPI_Error_string(mpi_err_, msg_, &len_);                             \
      MEAS_FATAL(std::string(#call) + ": " + std::string(msg_, len_));     \
    }                                                                      \
  } while (0)

// CUDA_CHECK and NCCL_CHECK live in cuda_check.hpp, which only the
// CUDA-enabled sources include.
