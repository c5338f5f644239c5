// doctest under MPI: every rank runs every test case (they are collective);
// only rank 0 reports. `--ranks N` is the size this program was written for:
// a wrong launcher silently makes N single-rank jobs, so it is checked first.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int expected = -1;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::strcmp(argv[i], "--ranks") == 0 && i + 1 < argc) {
      expected = std::atoi(argv[++i]);
      continue;
    }
    args.push_back(argv[i]);
  }
  if (expected != size) {
    if (rank == 0) std::fprintf(stderr, "expected MPI_Comm_size %d (--ranks), got %d\n", expected, size);
    MPI_Finalize();
    return 1;
  }
  doctest::Context ctx(int(args.size()), args.data());
  if (rank != 0) ctx.setOption("out", "/dev/null");
  int failed = ctx.run();
  int any = failed != 0;
  MPI_Allreduce(MPI_IN_PLACE, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return any;
}
