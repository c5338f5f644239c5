// Times MPI_Allgather and MPI_Reduce_scatter_block under SimGrid's SMPI
// (examples/simgrid/README.md). One line per (collective, group, bytes):
//
//   RESULT,<coll>,<ranks a group>,<stride>,<groups>,<active groups>,<bytes>,<seconds>
//
// bytes as nccl-tests counts them (all-gather: the output, reduce-scatter:
// the input); seconds: the slowest rank of any active group, from its start
// after a world barrier to its return (simulated time, MPI_Wtime). Groups: the world
// split by rank % groups, so with 4 ranks a node and 4 groups each group has
// one member on every node (stride 4); `--active A` runs the collectives in
// groups 0..A-1 only, the others wait at the barrier.
//
// Buffers: the large one (all-gather output, reduce-scatter input) is one
// SMPI-shared region for every rank (ffsim_region from shared_new.cpp, which
// is SMPI_SHARED_MALLOC underneath); the small one is SMPI_SHARED_MALLOC'd per
// rank. The reduction is a user operation that does nothing: the arithmetic is
// not part of what is compared (and would cost the host hours at 1,024 ranks).
#include <dlfcn.h>
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

using region_fn = void* (*)(size_t);
using void_fn = void (*)();

void noop_sum(void*, void*, int*, MPI_Datatype*) {}

std::vector<long long> parse_list(const char* s) {
  std::vector<long long> v;
  for (const char* p = s; *p;) {
    char* end = nullptr;
    v.push_back(std::strtoll(p, &end, 10));
    p = (*end == ',') ? end + 1 : end;
    if (end == p && *p) break;
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, world = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);

  std::vector<long long> sizes_mib = {1, 4, 16, 64, 256, 1024};
  int groups = 1, active = -1;
  std::string colls = "ag,rs";
  long long rs_max_mib = 1 << 30;  // reduce-scatter sizes above this are skipped
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        if (rank == 0) std::fprintf(stderr, "%s needs a value\n", a.c_str());
        MPI_Abort(MPI_COMM_WORLD, 2);
      }
      return argv[++i];
    };
    if (a == "--sizes-mib") sizes_mib = parse_list(next());
    else if (a == "--groups") groups = std::atoi(next());
    else if (a == "--active") active = std::atoi(next());
    else if (a == "--colls") colls = next();
    else if (a == "--rs-max-mib") rs_max_mib = std::atoll(next());
    else {
      if (rank == 0) std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
  }
  if (active < 0) active = groups;
  if (groups < 1 || world % groups != 0) {
    if (rank == 0) std::fprintf(stderr, "--groups must divide the world (%d ranks)\n", world);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const int color = rank % groups;
  MPI_Comm comm;
  MPI_Comm_split(MPI_COMM_WORLD, color, rank, &comm);
  int g = 0;
  MPI_Comm_size(comm, &g);
  const bool runs = color < active;

  auto region = reinterpret_cast<region_fn>(dlsym(RTLD_DEFAULT, "ffsim_region"));
  auto alias_begin = reinterpret_cast<void_fn>(dlsym(RTLD_DEFAULT, "ffsim_alias_begin"));
  auto alias_end = reinterpret_cast<void_fn>(dlsym(RTLD_DEFAULT, "ffsim_alias_end"));
  if (!region || !alias_begin || !alias_end) {
    if (rank == 0) std::fprintf(stderr, "shared_new.so is not preloaded (run.sh sets LD_PRELOAD)\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }

  long long max_bytes = 0;
  for (long long m : sizes_mib) max_bytes = std::max(max_bytes, m << 20);
  // The large buffer: one shared region for all ranks. The small one: 1/g of it.
  char* big = static_cast<char*>(region(size_t(max_bytes)));
  char* small = static_cast<char*>(SMPI_SHARED_MALLOC(size_t(max_bytes / g)));

  MPI_Op op;
  MPI_Op_create(noop_sum, 1, &op);

  for (const char* coll_name : {"ag", "rs"}) {
    const std::string coll = coll_name;
    if (colls.find(coll) == std::string::npos) continue;
    for (long long mib : sizes_mib) {
      const long long bytes = mib << 20;
      if (coll == "rs" && mib > rs_max_mib) continue;
      if (bytes % (4LL * g) != 0) continue;
      MPI_Barrier(MPI_COMM_WORLD);
      double t0 = MPI_Wtime();
      if (runs) {
        alias_begin();
        if (coll == "ag")
          MPI_Allgather(small, int(bytes / g), MPI_BYTE, big, int(bytes / g), MPI_BYTE, comm);
        else
          MPI_Reduce_scatter_block(big, small, int(bytes / g / 4), MPI_FLOAT, op, comm);
        alias_end();
      }
      double dt = runs ? MPI_Wtime() - t0 : 0, worst = 0;
      MPI_Reduce(&dt, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);  // the slowest rank of any active group
      if (rank == 0) {
        std::printf("RESULT,%s,%d,%d,%d,%d,%lld,%.9e\n", coll == "ag" ? "all-gather" : "reduce-scatter", g, groups,
                    groups, active, bytes, worst);
        std::fflush(stdout);
        std::fprintf(stderr, "[bench] %s g=%d groups=%d active=%d %lld MiB: %.3f ms\n", coll.c_str(), g, groups,
                     active, mib, worst * 1e3);
      }
    }
  }
  MPI_Op_free(&op);
  SMPI_SHARED_FREE(small);
  MPI_Comm_free(&comm);
  MPI_Finalize();
  return 0;
}
