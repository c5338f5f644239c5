#include "grid_comm.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

namespace ff::engine {

double now_s() {
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

GridComm::GridComm(MPI_Comm world, const Grid& grid, const Order& order) : world_(world), grid_(grid) {
  MPI_CHECK(MPI_Comm_rank(world, &world_rank_));
  coords_ = coords_of(grid, order, world_rank_);
  for (Axis a : kAxes) {
    // Members of one group agree on every other coordinate: the rank of the
    // member at coordinate 0 names the group; the coordinate orders it.
    Coords first = coords_;
    first[int(a)] = 0;
    int color = int(rank_of(grid, order, first));
    MPI_CHECK(MPI_Comm_split(world, color, coords_[int(a)], &axis_comm_[int(a)]));
  }
}

GridComm::~GridComm() {
  for (MPI_Comm& c : axis_comm_) MPI_Comm_free(&c);
}

void GridComm::account(Axis a, double bytes, double t0) {
  int i = int(a);
  stats.bytes[i] += bytes;
  stats.blocked_s[i] += now_s() - t0;
}

template <typename T>
void GridComm::all_reduce(Axis a, T* buf, size_t n, MPI_Op op) {
  if (size(a) == 1 || n == 0) return;
  double t0 = now_s();
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, buf, int(n), mpi_type<T>(), op, axis_comm_[int(a)]));
  account(a, double(n * sizeof(T)), t0);
}

template <typename T>
void GridComm::all_gather(Axis a, const T* shard, T* full, size_t shard_n) {
  if (size(a) == 1) {
    if (full != shard) std::copy(shard, shard + shard_n, full);
    return;
  }
  double t0 = now_s();
  MPI_CHECK(MPI_Allgather(shard, int(shard_n), mpi_type<T>(), full, int(shard_n), mpi_type<T>(),
                          axis_comm_[int(a)]));
  account(a, double(shard_n * size(a) * sizeof(T)), t0);
}

template <typename T>
void GridComm::reduce_scatter(Axis a, const T* full, T* shard, size_t shard_n) {
  if (size(a) == 1) {
    if (full != shard) std::copy(full, full + shard_n, shard);
    return;
  }
  double t0 = now_s();
  MPI_CHECK(MPI_Reduce_scatter_block(full, shard, int(shard_n), mpi_type<T>(), MPI_SUM, axis_comm_[int(a)]));
  account(a, double(shard_n * size(a) * sizeof(T)), t0);
}

GridComm::Ticket GridComm::post(Axis a, MPI_Request req, std::function<void()> on_done) {
  Ticket id = next_ticket_++;
  inflight_.push_back({id, a, req, now_s(), false, std::move(on_done)});
  return id;
}

template <typename T>
GridComm::Ticket GridComm::iall_reduce(Axis a, T* buf, size_t n) {
  if (size(a) == 1 || n == 0) return 0;
  double t0 = now_s();
  MPI_Request req;
  MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, buf, int(n), mpi_type<T>(), MPI_SUM, axis_comm_[int(a)], &req));
  account(a, double(n * sizeof(T)), t0);
  return post(a, req, {});
}

template <typename T>
GridComm::Ticket GridComm::iall_gather(Axis a, const T* shard, T* full, size_t shard_n) {
  if (size(a) == 1) {
    if (full != shard) std::copy(shard, shard + shard_n, full);
    return 0;
  }
  double t0 = now_s();
  MPI_Request req;
  MPI_CHECK(MPI_Iallgather(shard, int(shard_n), mpi_type<T>(), full, int(shard_n), mpi_type<T>(),
                           axis_comm_[int(a)], &req));
  account(a, double(shard_n * size(a) * sizeof(T)), t0);
  return post(a, req, {});
}

template <typename T>
GridComm::Ticket GridComm::ireduce_scatter(Axis a, const T* full, T* shard, size_t shard_n,
                                           std::function<void()> on_done) {
  if (size(a) == 1) {
    if (full != shard) std::copy(full, full + shard_n, shard);
    if (on_done) on_done();
    return 0;
  }
  double t0 = now_s();
  MPI_Request req;
  MPI_CHECK(MPI_Ireduce_scatter_block(full, shard, int(shard_n), mpi_type<T>(), MPI_SUM, axis_comm_[int(a)],
                                      &req));
  account(a, double(shard_n * size(a) * sizeof(T)), t0);
  return post(a, req, std::move(on_done));
}

// Completion callbacks run in posting order, so accumulation into the
// gradient shards happens in the same order as on the blocking path.
void GridComm::retire_done() {
  while (!inflight_.empty() && inflight_.front().done) {
    Inflight op = std::move(inflight_.front());
    inflight_.pop_front();
    if (op.on_done) op.on_done();
  }
}

void GridComm::progress() {
  for (Inflight& op : inflight_) {
    if (op.done) continue;
    double t0 = now_s();
    int flag = 0;
    MPI_CHECK(MPI_Test(&op.req, &flag, MPI_STATUS_IGNORE));
    double dt = now_s() - t0;
    stats.blocked_s[int(op.axis)] += dt;
    stats.nonblocking_exposed_s += dt;
    if (flag) {
      op.done = true;
      stats.inflight_s += now_s() - op.posted;
    }
  }
  retire_done();
}

void GridComm::wait(Ticket t) {
  if (t == 0) return;
  for (Inflight& op : inflight_) {
    if (op.id > t) break;
    if (op.done) continue;
    double t0 = now_s();
    MPI_CHECK(MPI_Wait(&op.req, MPI_STATUS_IGNORE));
    double t1 = now_s();
    stats.blocked_s[int(op.axis)] += t1 - t0;
    stats.nonblocking_exposed_s += t1 - t0;
    stats.inflight_s += t1 - op.posted;
    op.done = true;
  }
  retire_done();
}

void GridComm::wait_all() {
  if (!inflight_.empty()) wait(inflight_.back().id);
}

double GridComm::sum_all(double v) {
  double t0 = now_s();
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_DOUBLE, MPI_SUM, world_));
  stats.sync_s += now_s() - t0;
  return v;
}

#define FF_INSTANTIATE(T)                                                                         \
  template void GridComm::all_reduce<T>(Axis, T*, size_t, MPI_Op);                               \
  template void GridComm::all_gather<T>(Axis, const T*, T*, size_t);                              \
  template void GridComm::reduce_scatter<T>(Axis, const T*, T*, size_t);                          \
  template GridComm::Ticket GridComm::iall_reduce<T>(Axis, T*, size_t);                           \
  template GridComm::Ticket GridComm::iall_gather<T>(Axis, const T*, T*, size_t);                 \
  template GridComm::Ticket GridComm::ireduce_scatter<T>(Axis, const T*, T*, size_t, std::function<void()>);
FF_INSTANTIATE(float)
FF_INSTANTIATE(double)
#undef FF_INSTANTIATE

}  // namespace ff::engine
