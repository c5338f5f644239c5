#pragma once
// Comm over NCCL, for the cuda device: one NCCL communicator per axis, over
// the same groups as MpiComm (split_axes), each with its own communication
// stream, so collectives of different axes run side by side as the overlap
// flags intend. Every operation first makes its stream wait for the compute
// stream's event (the kernels launched before it), then an event after it
// on its stream is its ticket; waiting polls that event while driving the
// others' completions. Stage messages (P) go by ncclSend/ncclRecv on
// communicators by direction and stage parity, so that on each a rank only
// sends or only receives, in micro-batch order: a receive posted early never
// holds up a send behind it on one stream. The loss and norm scalars, the
// barrier and the report's sums are the host's, over MPI.
#include <mpi.h>

#include <deque>
#include <functional>
#include <vector>

#include "engine/comm.hpp"

struct CUstream_st;
struct CUevent_st;
struct ncclComm;

namespace ff::engine {

class CudaDevice;

class NcclComm final : public Comm {
 public:
  // Every rank of `world` (one GPU each, selected) calls it.
  NcclComm(MPI_Comm world, const Grid& grid, const Order& order, CudaDevice& device);
  ~NcclComm() override;

  void wait(Ticket t) override;
  void wait_all() override;
  void wait_one(Ticket t) override;
  size_t wait_any(const std::vector<Ticket>& ts) override;
  bool done(Ticket t) override;
  bool pending() const override { return !inflight_.empty() || !p2p_.empty(); }
  void progress() override;
  double sum_all(double v) override;
  bool sum_to_root(double* buf, size_t n) override;
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
  struct Lane {  // a communicator and the stream its operations queue on
    ncclComm* comm = nullptr;
    CUstream_st* stream = nullptr;
  };
  struct Op {
    Ticket id;
    Axis axis;
    CUevent_st* event;
    double posted;
    bool done = false;
    std::function<void()> on_done;
  };
  // Queues `call` on `lane` after the device's kernels; returns its ticket.
  template <class Call>
  Ticket enqueue(Axis a, const Lane& lane, double bytes, bool p2p, Call call, std::function<void()> on_done = {});
  void blocking(Ticket t);  // waits for t alone, accounted to its axis
  bool test(Op& op);
  void retire_done();
  Op* find(Ticket t);
  Ticket local(const void* from, void* to, size_t n, Scalar s, const std::function<void()>& on_done);
  CUevent_st* event();
  // The stage-message lane from stage `from` to the neighbouring stage `to`.
  const Lane& stage_lane(int from, int to) const;

  CudaDevice& gpu_;
  MPI_Comm world_;
  PerAxis<MPI_Comm> axis_mpi_{};
  PerAxis<Lane> lanes_{};
  Lane stage_lanes_[2][2];  // [direction: 0 forward (to the next stage), 1 backward][sender's stage parity]
  std::vector<CUevent_st*> spare_;
  std::deque<Op> inflight_;  // collectives: completed, and their callbacks run, in posting order
  std::deque<Op> p2p_;       // stage messages: each completed on its own
  Ticket next_ticket_ = 1;
  bool in_wait_ = false;
};

}  // namespace ff::engine
