#pragma once
// The axis communicators of one rank, and every collective the engine
// issues, each accounted to its axis: bytes as nccl-tests counts the buffer,
// and the time the caller spent blocked in MPI for it (calls, tests, waits).
// Open MPI 4.1 moves a non-blocking collective only inside MPI calls, so
// `progress()` is called between GEMM chunks while anything is in flight.
#include <mpi.h>

#include <array>
#include <cstddef>
#include <deque>
#include <functional>
#include <string>

#include "check.hpp"
#include "grid.hpp"

namespace ff::engine {

template <typename T> MPI_Datatype mpi_type();
template <> inline MPI_Datatype mpi_type<float>() { return MPI_FLOAT; }
template <> inline MPI_Datatype mpi_type<double>() { return MPI_DOUBLE; }

double now_s();

struct CommStats {
  PerAxis<double> bytes{};            // this rank
  PerAxis<double> blocked_s{};        // inside MPI for that axis
  double sync_s = 0;                  // loss and gradient-norm scalars (no axis)
  double inflight_s = 0;              // non-blocking ops: post to completion, summed
  double nonblocking_exposed_s = 0;   // of which spent inside MPI (tests and waits)
};

class GridComm {
 public:
  // Splits `world` (any communicator whose size is grid.total()) by the
  // placement `order`: rank r of `world` sits at coords_of(grid, order, r).
  GridComm(MPI_Comm world, const Grid& grid, const Order& order);
  ~GridComm();
  GridComm(const GridComm&) = delete;
  GridComm& operator=(const GridComm&) = delete;

  MPI_Comm world() const { return world_; }
  int world_rank() const { return world_rank_; }
  const Grid& grid() const { return grid_; }
  int size(Axis a) const { return grid_.size(a); }
  int coord(Axis a) const { return coords_[int(a)]; }
  const Coords& coords() const { return coords_; }

  // Blocking collectives over one axis; a size-1 axis is a no-op and costs nothing.
  template <typename T> void all_reduce(Axis a, T* buf, size_t n, MPI_Op op = MPI_SUM);
  template <typename T> void all_gather(Axis a, const T* shard, T* full, size_t shard_n);
  template <typename T> void reduce_scatter(Axis a, const T* full, T* shard, size_t shard_n);

  // Non-blocking forms: a ticket to `wait` on. `on_done` runs when the
  // operation completes, in posting order per call to wait/progress.
  using Ticket = long;
  template <typename T> Ticket iall_reduce(Axis a, T* buf, size_t n);
  template <typename T> Ticket iall_gather(Axis a, const T* shard, T* full, size_t shard_n);
  template <typename T> Ticket ireduce_scatter(Axis a, const T* full, T* shard, size_t shard_n,
                                               std::function<void()> on_done = {});
  void wait(Ticket t);
  void wait_all();
  bool pending() const { return !inflight_.empty(); }
  // Drives every in-flight operation once (MPI_Test); cheap when none is.
  void progress();

  // A scalar sum over the whole grid (loss, gradient norm).
  double sum_all(double v);

  CommStats stats;

 private:
  struct Inflight {
    Ticket id;
    Axis axis;
    MPI_Request req;
    double posted;
    bool done = false;
    std::function<void()> on_done;
  };
  Ticket post(Axis a, MPI_Request req, std::function<void()> on_done);
  void retire_done();
  void account(Axis a, double bytes, double t0);

  MPI_Comm world_;
  int world_rank_ = 0;
  Grid grid_;
  Coords coords_{};
  PerAxis<MPI_Comm> axis_comm_{};
  std::deque<Inflight> inflight_;
  Ticket next_ticket_ = 1;
};

}  // namespace ff::engine
