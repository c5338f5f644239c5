// The NCCL backend on real GPUs: the same contents check measure runs before
// timing, over all ranks. Without a GPU it exits 77 (meson: skipped); the
// CUDA runtime then reports a driver error rather than zero devices (MODEL.md
// §7), so any error from cudaGetDeviceCount means "no GPU".
#include <cuda_runtime.h>
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "measure/backend.hpp"
#include "measure/harness.hpp"

int main(int argc, char** argv) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no CUDA device: skipped\n");
    return 77;
  }
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int expected = argc > 2 ? std::atoi(argv[2]) : 0;
  if (size != expected) {
    std::fprintf(stderr, "MPI_Comm_size is %d, expected %d\n", size, expected);
    MPI_Finalize();
    return 1;
  }
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
  std::string why;
  auto backend = ff::measure::make_nccl_backend(node, &why);
  if (!backend) {
    std::printf("%s: skipped\n", why.c_str());
    MPI_Finalize();
    return 77;
  }
  std::vector<int> everyone;
  for (int r = 0; r < size; ++r) everyone.push_back(r);
  ff::measure::Membership m = ff::measure::join_group(*backend, {everyone}, rank);
  size_t count = 1 << 16;
  float* send = backend->alloc(count * size_t(size));
  float* recv = backend->alloc(count * size_t(size));
  long long wrong = 0, total = 0;
  for (ff::Coll op : {ff::Coll::AllReduce, ff::Coll::AllGather, ff::Coll::ReduceScatter})
    wrong += ff::measure::check_collective(*backend, *m.group, op, false, m.members, send, recv, count);
  MPI_Allreduce(&wrong, &total, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) std::printf("nccl: %lld wrong elements\n", total);
  backend->release(send);
  backend->release(recv);
  m.group.reset();
  MPI_Comm_free(&node);
  MPI_Finalize();
  return total == 0 ? 0 : 1;
}
