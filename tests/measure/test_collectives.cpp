// Each collective on each geometry moves the right data: every rank sends a
// pattern that names its world rank and the element index, and checks the
// exact result. The expectations are written here from the definitions of
// the collectives, not taken from measure's own check.
#include <doctest/doctest.h>
#include <mpi.h>

#include <algorithm>
#include <vector>

#include "advisor/core/measurement.hpp"
#include "engine/runtime/mpi_poll.hpp"
#include "measure/backend.hpp"
#include "measure/groups.hpp"
#include "measure/harness.hpp"
#include "tests/measure/world.hpp"

namespace {

using fftest::value;
using fftest::world_rank;
using fftest::world_size;

// Every per-node count that divides the world, every default geometry of it.
template <class F>
void for_each_geometry(F&& f) {
  int size = world_size();
  for (int per_node = 1; per_node <= size; ++per_node) {
    if (size % per_node) continue;
    for (const auto& g : ff::measure::default_geometries(size, per_node)) f(g, per_node);
  }
}

}  // namespace

TEST_CASE("each collective on each geometry delivers exactly the expected data") {
  auto backend = ff::measure::make_mpi_backend();
  int me = world_rank(), checked_groups = 0;
  for_each_geometry([&](const ff::Geometry& g, int per_node) {
    auto groups = ff::measure::geometry_groups(g, world_size(), per_node);
    ff::measure::Membership m = ff::measure::join_group(*backend, groups, me);
    if (!m.group) return;  // this rank sits this geometry out
    ++checked_groups;
    CAPTURE(per_node);
    CAPTURE(ff::measure::geometry_name(g));
    // The communicator holds the group's members, in ring order.
    std::vector<int> ranks(size_t(m.group->size));
    MPI_Allgather(&me, 1, MPI_INT, ranks.data(), 1, MPI_INT, m.group->comm);
    CHECK(ranks == m.members);
    int n = m.group->size, pos = m.group->rank;
    for (bool nb : {false, true})  // blocking, and issued non-blocking then waited for
    for (size_t count : {size_t(1), size_t(7), size_t(1000), size_t(40000)}) {
      CAPTURE(nb);
      CAPTURE(count);
      // all-reduce: element i is the sum of every member's value(member, i).
      // The mpi backend reduces `recv` in place (as the engine does), so the
      // input is there too.
      std::vector<float> send(count), recv(count);
      for (size_t i = 0; i < count; ++i) send[i] = recv[i] = value(me, i);
      backend->run(ff::Coll::AllReduce, *m.group, send.data(), recv.data(), count, nb);
      int wrong = 0;
      for (size_t i = 0; i < count; ++i) {
        float sum = 0;
        for (int r : m.members) sum += value(r, i);
        wrong += recv[i] != sum;
      }
      CHECK(wrong == 0);
      // all-gather: block j of the output is member j's send buffer.
      std::vector<float> gathered(count * size_t(n), -1);
      backend->run(ff::Coll::AllGather, *m.group, send.data(), gathered.data(), count, nb);
      wrong = 0;
      for (int j = 0; j < n; ++j)
        for (size_t i = 0; i < count; ++i) wrong += gathered[size_t(j) * count + i] != value(m.members[size_t(j)], i);
      CHECK(wrong == 0);
      // reduce-scatter: each member sends n blocks; this rank receives the
      // sum of every member's block `pos`.
      std::vector<float> big(count * size_t(n)), part(count, -1);
      for (size_t i = 0; i < big.size(); ++i) big[i] = value(me, i);
      backend->run(ff::Coll::ReduceScatter, *m.group, big.data(), part.data(), count, nb);
      wrong = 0;
      for (size_t i = 0; i < count; ++i) {
        float sum = 0;
        for (int r : m.members) sum += value(r, size_t(pos) * count + i);
        wrong += part[i] != sum;
      }
      CHECK(wrong == 0);
    }
  });
  CHECK(checked_groups > 0);
}

// measure's own check (run before timing) must pass on a working backend
// and catch one that corrupts a single element.
namespace {
struct OffByOne : ff::measure::Backend {
  std::unique_ptr<ff::measure::Backend> inner = ff::measure::make_mpi_backend();
  std::string name() const override { return "broken"; }
  std::unique_ptr<ff::measure::Group> make_group(MPI_Comm c) override { return inner->make_group(c); }
  float* alloc(size_t n) override { return inner->alloc(n); }
  void release(float* b) override { inner->release(b); }
  void upload(float* d, const float* s, size_t n) override { inner->upload(d, s, n); }
  void download(float* d, const float* s, size_t n) override { inner->download(d, s, n); }
  bool has_nonblocking() const override { return true; }
  void run(ff::Coll op, ff::measure::Group& g, const float* s, float* r, size_t n, bool nb) override {
    inner->run(op, g, s, r, n, nb);
    r[n / 2] += 1;  // a wrong element in the middle
  }
  void send_recv(ff::measure::Group& g, const float* s, float* r, size_t n) override { inner->send_recv(g, s, r, n); }
  float* alloc_host(size_t n) override { return inner->alloc_host(n); }
  void release_host(float* b) override { inner->release_host(b); }
  void copy_host(ff::measure::Group& g, bool to_device, float* h, float* d, size_t n) override {
    inner->copy_host(g, to_device, h, d, n);
  }
  std::string host_link_kind() const override { return inner->host_link_kind(); }
  void sync(ff::measure::Group& g) override { inner->sync(g); }
  void stamp(ff::measure::Group& g, int i) override { inner->stamp(g, i); }
  std::vector<double> elapsed(ff::measure::Group& g, int n) override { return inner->elapsed(g, n); }
};
}  // namespace

TEST_CASE("measure's contents check passes a correct backend and catches a corrupted element") {
  auto good = ff::measure::make_mpi_backend();
  OffByOne bad;
  std::vector<int> everyone;
  for (int r = 0; r < world_size(); ++r) everyone.push_back(r);
  ff::measure::Membership m = ff::measure::join_group(*good, {everyone}, world_rank());
  REQUIRE(m.group);
  size_t count = 1000;
  float* send = good->alloc(count * size_t(world_size()));
  float* recv = good->alloc(count * size_t(world_size()));
  for (ff::Coll op : {ff::Coll::AllReduce, ff::Coll::AllGather, ff::Coll::ReduceScatter})
    for (bool nonblocking : {false, true}) {
      CAPTURE(ff::coll_name(op));
      CAPTURE(nonblocking);
      CHECK(ff::measure::check_collective(*good, *m.group, op, nonblocking, m.members, send, recv, count) == 0);
      CHECK(ff::measure::check_collective(bad, *m.group, op, nonblocking, m.members, send, recv, count) == 1);
    }
  good->release(send);
  good->release(recv);
}

TEST_CASE("timings: positive, identical on every rank (the maximum), idle ranks included") {
  auto backend = ff::measure::make_mpi_backend();
  int size = world_size();
  // One node of all ranks, groups of size−1: the last rank sits out (from 3
  // ranks on) and must still take part in the barrier and the maximum.
  auto groups = ff::measure::geometry_groups(ff::Geometry{false, 1, std::max(2, size - 1), 1}, size, size);
  ff::measure::Membership m = ff::measure::join_group(*backend, groups, world_rank());
  size_t count = 4096;
  float* send = backend->alloc(count);
  float* recv = backend->alloc(count);
  ff::measure::Timing t = ff::measure::time_collective(*backend, m.group.get(), ff::Coll::AllReduce, false, send, recv, count,
                                                       ff::measure::SweepOptions{1, 4, 1, false, 0.0});
  CHECK(t.per_op_s > 0);
  REQUIRE(t.iter_s.size() == 4);
  for (double s : t.iter_s) CHECK(s > 0);
  double lo = 0, hi = 0;
  MPI_Allreduce(&t.per_op_s, &lo, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&t.per_op_s, &hi, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  CHECK(lo == hi);
  backend->release(send);
  backend->release(recv);
}

TEST_CASE("timings after an idle gap: each iteration alone, the gap not counted") {
  auto backend = ff::measure::make_mpi_backend();
  int size = world_size();
  auto groups = ff::measure::geometry_groups(ff::Geometry{false, 1, std::max(2, size - 1), 1}, size, size);
  ff::measure::Membership m = ff::measure::join_group(*backend, groups, world_rank());
  size_t count = 1024;
  float* send = backend->alloc(count);
  float* recv = backend->alloc(count);
  const int iters = 4;
  const double gap = 0.05;
  double t0 = MPI_Wtime();
  ff::measure::Timing t = ff::measure::time_collective(*backend, m.group.get(), ff::Coll::AllReduce, false, send, recv,
                                                       count, ff::measure::SweepOptions{1, iters, 1, false, gap});
  double wall = MPI_Wtime() - t0;
  // Every iteration slept its gap first: the call lasts at least iters × gap.
  CHECK(wall >= iters * gap);
  REQUIRE(t.iter_s.size() == size_t(iters));
  double sum = 0;
  for (double s : t.iter_s) {
    CHECK(s > 0);
    sum += s;
  }
  // The per-op time is the iterations' mean, and holds none of the gap: a
  // 4 KiB all-reduce on one host takes well under 50 ms even oversubscribed.
  CHECK(t.per_op_s == doctest::Approx(sum / iters).scale(0));
  CHECK(t.per_op_s < gap);
  double lo = 0, hi = 0;
  MPI_Allreduce(&t.per_op_s, &lo, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&t.per_op_s, &hi, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  CHECK(lo == hi);
  backend->release(send);
  backend->release(recv);
}

TEST_CASE("timings after an idle gap: each group its slowest member, the mean over groups") {
  // Pairs {0,1}, {2,3}, ...; in pair k, member 0 works (k+1)·d and member 1
  // nothing. Pair k's time is (k+1)·d, so over G pairs the figure is
  // d·(G+1)/2 by hand; the slowest pair of each iteration would give G·d.
  auto backend = ff::measure::make_mpi_backend();
  int size = world_size(), me = world_rank();
  int pairs = size / 2;
  std::vector<std::vector<int>> groups;
  for (int k = 0; k < pairs; ++k) groups.push_back({2 * k, 2 * k + 1});
  ff::measure::Membership m = ff::measure::join_group(*backend, groups, me);
  const double d = 0.02;
  double work = me < 2 * pairs && me % 2 == 0 ? (me / 2 + 1) * d : 0.0;
  const int iters = 3;
  ff::measure::Timing t = ff::measure::time_op(*backend, m.group.get(), [&] { ff::sleep_for(work); },
                                               ff::measure::SweepOptions{0, iters, 1, false, 0.001});
  double expect = d * (pairs + 1) / 2;
  REQUIRE(t.iter_s.size() == size_t(iters));
  for (double s : t.iter_s) {
    CHECK(s >= expect * 0.999);
    CHECK(s < expect + d / 2);  // a sleep's overshoot on 2 cores is well under 10 ms
  }
  CHECK(t.per_op_s >= expect * 0.999);
  CHECK(t.per_op_s < expect + d / 2);
  if (pairs >= 2) CHECK(t.per_op_s < pairs * d - d / 4);  // not the slowest pair's
}

TEST_CASE("nccl-tests' byte conventions") {
  // all-reduce: the buffer; all-gather: the output, g blocks; reduce-scatter:
  // the input, g blocks. 1 MiB = 262144 floats; over 3 ranks 87381 floats a
  // block, so 3·87381·4 = 1048572 bytes actually move.
  CHECK(ff::measure::op_count(ff::Coll::AllReduce, 1 << 20, 3) == 262144);
  CHECK(ff::measure::op_count(ff::Coll::AllGather, 1 << 20, 3) == 87381);
  CHECK(ff::measure::op_count(ff::Coll::ReduceScatter, 1 << 20, 4) == 65536);
  CHECK(ff::measure::op_bytes(ff::Coll::AllGather, 87381, 3) == 1048572.0);
  CHECK(ff::measure::op_bytes(ff::Coll::AllReduce, 262144, 3) == 1048576.0);
  CHECK(ff::measure::op_count(ff::Coll::AllGather, 8, 4) == 0);  // less than a float per rank
  CHECK(ff::busbw_factor(ff::Coll::AllReduce, 4) == doctest::Approx(1.5).scale(0));
  CHECK(ff::busbw_factor(ff::Coll::AllGather, 4) == doctest::Approx(0.75).scale(0));
}
