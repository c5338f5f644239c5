#include "check.hpp"

#include <cstdio>
#include <cstdlib>

namespace meas {

void fatal(const char* file, int line, const std::string& what) {
  int rank = -1, initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::fprintf(stderr, "measure: rank %d: %s:%d: %s\n", rank, file, line, what.c_str());
  std::fflush(stderr);
  if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, 1);
  std::exit(1);
}

}  // namespace meas
