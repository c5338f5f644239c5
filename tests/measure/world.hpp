#pragma once
// What the multi-rank measure tests ask of MPI_COMM_WORLD, and the pattern
// their ranks send.
#include <mpi.h>

#include <cstddef>

namespace fftest {

inline int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

inline int world_size() {
  int s = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

// Distinct for every (rank, index) the tests use and exact in fp32, and sums
// of up to 8 of them too (< 2^24).
inline float value(int rank, size_t i) { return float(rank * 100000 + int(i % 99991)); }

}  // namespace fftest
