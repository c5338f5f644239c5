// The runner of every multi-rank doctest program: MPI_Init, then the expected
// rank count (--ranks N, first argument) is asserted — a binary started by
// the wrong launcher silently becomes N one-rank jobs (MODEL.md §7) — then
// doctest on every rank, and the job fails if any rank failed.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc < 3 || std::strcmp(argv[1], "--ranks") != 0) {
    std::fprintf(stderr, "usage: mpirun -np N %s --ranks N [doctest options]\n", argv[0]);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  int expected = std::atoi(argv[2]);
  if (size != expected) {
    std::fprintf(stderr, "rank %d: MPI_Comm_size is %d, the test expects %d (wrong launcher?)\n", rank, size, expected);
    MPI_Finalize();
    return 1;
  }
  // doctest skips argv[0]: hand it the program name, then the options after "--ranks N".
  argv[2] = argv[0];
  doctest::Context context;
  context.applyCommandLine(argc - 2, argv + 2);
  context.setOption("no-intro", true);
  if (rank != 0) context.setOption("minimal", true);  // other ranks print only their failures
  int failed = context.run() != 0 ? 1 : 0, any = 0;
  MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0 && any && !failed) std::fprintf(stderr, "a test failed on another rank (see above)\n");
  MPI_Finalize();
  return any;
}
