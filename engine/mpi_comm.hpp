#pragma once
// Comm over MPI: one communicator per axis, split from the world by the
// placement order. Open MPI 4.1 moves a non-blocking collective only inside
// MPI calls, so `progress()` tests what is in flight; the cpu device calls it
// between GEMM panels, the paced one while it sleeps. With poll_s = Δ > 0
// (the paced device) every wait is MPI_Test + sleep Δ, blocking collectives
// included (mpi_poll.hpp says why).
#include <mpi.h>

#include <deque>
#include <vector>

#include "engine/comm.hpp"
#include "engine/runtime/check.hpp"

namespace ff::engine {

MPI_Datatype mpi_type(Scalar s);
// The op of `op` on values of `s`: bf16's are user ops (mpi_comm.cpp says why).
MPI_Op mpi_op(ReduceOp op, Scalar s);
int rank_in(MPI_Comm c);

// One communicator per axis, split from `world` by the placement `order`:
// the members of a group, ranked by their coordinate on the axis.
PerAxis<MPI_Comm> split_axes(MPI_Comm world, const Grid& grid, const Order& order, const Coords& coords);

class MpiComm final : public Comm {
 public:
  // Splits `world` (any communicator whose size is grid.total()) by the
  // placement `order`: rank r of `world` sits at coords_of(grid, order, r).
  MpiComm(MPI_Comm world, const Grid& grid, const Order& order, Device& device, double poll_s = 0);
  ~MpiComm() override;

  MPI_Comm world() const { return world_; }
  double poll_s() const { return poll_s_; }

  void wait(Ticket t) override;
  void wait_all() override;
  void wait_one(Ticket t) override;
  size_t wait_any(const std::vector<Ticket>& ts) override;
  bool done(Ticket t) override;
  bool pending() const override { return !inflight_.empty() || !p2p_.empty(); }
  // Drives every in-flight operation once (MPI_Test); cheap when none is.
  void progress() override;
  double sum_all(double v) override;
  bool sum_to_root(double* buf, size_t n) override;
  // A barrier, waited for as every other operation (outside step timing).
  void barrier() override;

 protected:
  void all_reduce_raw(Axis a, void* buf, size_t n, Scalar s, ReduceOp op) override;
  void all_gather_raw(Axis a, const void* shard, void* full, size_t shard_n, Scalar s) override;
  void reduce_scatter_raw(Axis a, const void* full, void* shard, size_t shard_n, Scalar s) override;
  Ticket iall_reduce_raw(Axis a, void* buf, size_t n, Scalar s) override;
  Ticket iall_gather_raw(Axis a, const void* shard, void* full, size_t shard_n, Scalar s, Source src) override;
  Ticket ireduce_scatter_raw(Axis a, const void* full, void* shard, size_t shard_n, Scalar s,
                             std::function<void()> on_done) override;
  Ticket ireduce_scatter_parts_raw(Axis a, const void* full, void* part, size_t n, Scalar s,
                                   std::function<void()> on_done) override;
  void all_gather_parts_raw(Axis a, void* buf, size_t n, Scalar s) override;
  Ticket isend_raw(Axis a, int peer, const void* buf, size_t n, Scalar s, int tag) override;
  Ticket irecv_raw(Axis a, int peer, void* buf, size_t n, Scalar s, int tag) override;

 private:
  struct Inflight {
    Ticket id;
    Axis axis;
    MPI_Request req;
    double posted;
    bool done = false;
    long event = -1;  // its CommEvent, when tracing
    std::function<void()> on_done;
    std::vector<int> counts;  // a v-collective's counts live until it completes
  };
  Ticket post(Axis a, double bytes, MPI_Request req, std::function<void()> on_done, std::vector<int> counts = {});
  Ticket post_p2p(Axis a, double bytes, MPI_Request req);
  long trace(Axis a, CommEvent::Kind kind, double bytes, double ready_s, double start_s, double end_s);
  void mark_done(Inflight& op);
  // The even parts of n over axis a: counts, and displacements if asked.
  std::vector<int> part_counts(Axis a, size_t n, std::vector<int>* displs = nullptr) const;
  void retire_done();
  void test_inflight();
  Inflight* find(Ticket t);
  void complete_op(Inflight& op);  // waits for op alone, accounting it
  void account(Axis a, double bytes, double seconds);
  // A blocking collective over axis a after the device's kernels; accounts
  // (and traces) it.
  template <class Start, class Call> void run_blocking(Axis a, double bytes, Start start, Call call);
  // When a blocking operation was ready (before the device sync), issued and
  // done, on the steady clock.
  struct BlockedSpan {
    double ready_s, start_s, end_s;
    double seconds() const { return end_s - start_s; }
  };
  template <class Start, class Call> BlockedSpan run_blocking(Start start, Call call);
  template <class Start>
  Ticket start_collective(Axis a, double bytes, bool after_device, Start start, std::function<void()> on_done = {},
                          std::vector<int> counts = {});
  Ticket local(const void* from, void* to, size_t n, Scalar s, const std::function<void()>& on_done);
  // Blocks until `req` completes: MPI_Wait, or with Δ, MPI_Test + sleep
  // while progressing what else is in flight. Returns the seconds waited.
  double complete(MPI_Request* req);

  MPI_Comm world_;
  int world_rank_ = 0;
  double poll_s_ = 0;
  PerAxis<MPI_Comm> axis_comm_{};
  std::deque<Inflight> inflight_;  // collectives: completed, and their callbacks run, in posting order
  std::deque<Inflight> p2p_;       // sends and receives: each completed on its own (wait_one, wait_any)
  Ticket next_ticket_ = 1;
  bool in_wait_ = false;  // wait() walks inflight_ by index: no retiring meanwhile
};

}  // namespace ff::engine
