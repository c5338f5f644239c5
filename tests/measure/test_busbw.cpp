// measure's all-reduce bus bandwidth against a plain loop of MPI_Allreduce
// written here: 2 ranks, 16 MiB, 5 repeats of each, interleaved so both see
// the same machine noise; the medians must agree within 20%.
#include <doctest/doctest.h>
#include <mpi.h>

#include <algorithm>
#include <vector>

#include "backend.hpp"
#include "harness.hpp"
#include "measurement.hpp"

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

TEST_CASE("busbw: measure's harness vs a plain MPI_Allreduce loop, 2 ranks, 16 MiB") {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  REQUIRE(size == 2);
  const size_t bytes = size_t(16) << 20, floats = bytes / sizeof(float);
  const int warmup = 2, iters = 10, repeats = 5;

  auto backend = ff::measure::make_mpi_backend();
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  ff::measure::Membership m = ff::measure::join_group(*backend, {{0, 1}}, rank);
  REQUIRE(m.group);
  float* send = backend->alloc(floats);
  float* recv = backend->alloc(floats);
  std::vector<float> a(floats, 1.0f), b(floats, 0.0f);

  std::vector<double> measured, plain;
  for (int rep = 0; rep < repeats; ++rep) {
    // measure's way: its harness, its byte count and busbw factor.
    size_t count = ff::measure::op_count(ff::Coll::AllReduce, bytes, 2);
    ff::measure::Timing t = ff::measure::time_collective(*backend, m.group.get(), ff::Coll::AllReduce, false, send, recv, count, warmup,
                                           iters);
    measured.push_back(ff::measure::op_bytes(ff::Coll::AllReduce, count, 2) / t.per_op_s *
                       ff::busbw_factor(ff::Coll::AllReduce, 2));

    // The plain way: barrier, a loop, the slowest rank; for 2 ranks the
    // all-reduce busbw factor 2(g−1)/g is 1, so busbw = bytes / time.
    for (int i = 0; i < warmup; ++i) MPI_Allreduce(a.data(), b.data(), int(floats), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; ++i) MPI_Allreduce(a.data(), b.data(), int(floats), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double mine = (MPI_Wtime() - t0) / iters, slowest = 0;
    MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    plain.push_back(double(bytes) / slowest);
  }
  backend->release(send);
  backend->release(recv);
  double ours = median(measured), theirs = median(plain);
  if (rank == 0)
    MESSAGE("busbw median of 5: measure " << ours / 1e9 << " GB/s, plain MPI_Allreduce loop " << theirs / 1e9 << " GB/s");
  CHECK(ours == doctest::Approx(theirs).epsilon(0.20));
}
