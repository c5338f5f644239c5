#pragma once
// The communication a rank of the grid issues, each operation accounted to
// its axis: bytes as nccl-tests counts the buffer, and the time the caller
// spent blocked for it. An interface, so the schedule (gpt.cpp) is the same
// over MPI (mpi_comm.hpp) and NCCL (cuda/nccl_comm.hpp). Every operation
// waits first for the kernels launched before it (a communication stream
// waiting on the compute stream's event), unless its data did not come from
// the device this step (Source::Host: the weight prefetch).
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "advisor/core/grid.hpp"
#include "engine/device.hpp"
#include "engine/runtime/bf16.hpp"
#include "engine/runtime/fatal.hpp"

namespace ff::engine {

enum class Scalar { F32, F64, BF16 };
template <typename T> constexpr Scalar scalar_of();
template <> constexpr Scalar scalar_of<float>() { return Scalar::F32; }
template <> constexpr Scalar scalar_of<double>() { return Scalar::F64; }
template <> constexpr Scalar scalar_of<bf16>() { return Scalar::BF16; }
// Every switch on Scalar names each one, without a default: a Scalar added
// later is a -Wswitch warning at each, not a size or type guessed from F32.
inline size_t scalar_bytes(Scalar s) {
  switch (s) {
    case Scalar::F32: return 4;
    case Scalar::F64: return 8;
    case Scalar::BF16: return 2;
  }
  FF_FATAL("scalar_bytes: Scalar " + std::to_string(int(s)));
}

enum class ReduceOp { Sum, Max };

// Part i of n values split over g ranks: [part_begin(n, g, i), part_begin(n, g, i + 1)).
inline size_t part_begin(size_t n, int g, int i) { return n * size_t(i) / size_t(g); }
enum class Source { Device, Host };

struct CommStats {
  PerAxis<double> bytes{};            // this rank
  PerAxis<double> blocked_s{};        // waiting for that axis' operations
  double sync_s = 0;                  // loss and gradient-norm scalars (no axis)
  double inflight_s = 0;              // non-blocking ops: post to completion, summed
  double nonblocking_exposed_s = 0;   // of which spent waiting for them (tests and waits)
};

// One operation of one rank, when tracing (`engine --trace-comm`): seconds on
// the steady clock, which ranks on one host share. Blocking: `ready_s` before
// the device's kernels are waited for, `start_s` when the call is issued,
// `end_s` when it returns. Non-blocking: posted at `start_s` (= `ready_s`),
// seen complete at `end_s` (the first test or wait that found it done; −1 if
// never seen).
struct CommEvent {
  enum Kind { Blocking, NonBlocking, Message };
  int step;  // -1: before the first step
  Axis axis;
  Kind kind;
  double bytes, ready_s, start_s, end_s;
};

class Comm : public ProgressHook {
 public:
  using Ticket = long;  // 0: nothing to wait for

  Comm(const Grid& grid, const Coords& coords, Device& device) : grid_(grid), coords_(coords), device_(device) {}
  ~Comm() override = default;
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;

  const Grid& grid() const { return grid_; }
  int size(Axis a) const { return grid_.size(a); }
  int coord(Axis a) const { return coords_[int(a)]; }
  const Coords& coords() const { return coords_; }
  Device& device() const { return device_; }

  // Blocking collectives over one axis; a size-1 axis is a no-op and costs nothing.
  template <typename T> void all_reduce(Axis a, T* buf, size_t n, ReduceOp op = ReduceOp::Sum) {
    all_reduce_raw(a, buf, n, scalar_of<T>(), op);
  }
  template <typename T> void all_gather(Axis a, const T* shard, T* full, size_t shard_n) {
    all_gather_raw(a, shard, full, shard_n, scalar_of<T>());
  }
  template <typename T> void reduce_scatter(Axis a, const T* full, T* shard, size_t shard_n) {
    reduce_scatter_raw(a, full, shard, shard_n, scalar_of<T>());
  }
  // Non-blocking forms: a ticket to `wait` on. `on_done` runs when the
  // operation completes, in posting order per call to wait/progress.
  template <typename T> Ticket iall_reduce(Axis a, T* buf, size_t n) {
    return iall_reduce_raw(a, buf, n, scalar_of<T>());
  }
  template <typename T> Ticket iall_gather(Axis a, const T* shard, T* full, size_t shard_n,
                                           Source src = Source::Device) {
    return iall_gather_raw(a, shard, full, shard_n, scalar_of<T>(), src);
  }
  template <typename T> Ticket ireduce_scatter(Axis a, const T* full, T* shard, size_t shard_n,
                                               std::function<void()> on_done = {}) {
    return ireduce_scatter_raw(a, full, shard, shard_n, scalar_of<T>(), std::move(on_done));
  }
  // A buffer of n values in `size(a)` near-even parts, part i =
  // [n·i/g, n·(i+1)/g) (the sharded optimizer's ownership): the sum of every
  // rank's `full` reduced into this rank's part (written to `part`), and
  // every part gathered from its owner into `buf` in place.
  template <typename T> Ticket ireduce_scatter_parts(Axis a, const T* full, T* part, size_t n,
                                                     std::function<void()> on_done = {}) {
    return ireduce_scatter_parts_raw(a, full, part, n, scalar_of<T>(), std::move(on_done));
  }
  template <typename T> void all_gather_parts(Axis a, T* buf, size_t n) {
    all_gather_parts_raw(a, buf, n, scalar_of<T>());
  }
  // Point to point along an axis (pipeline stages on P): to or from the rank
  // at coordinate `peer` of this rank's group, `tag` the micro-batch. Sends
  // wait for the device's kernels; receives do not (the buffer is the
  // host's until the receive completes).
  template <typename T> Ticket isend(Axis a, int peer, const T* buf, size_t n, int tag) {
    return isend_raw(a, peer, buf, n, scalar_of<T>(), tag);
  }
  template <typename T> Ticket irecv(Axis a, int peer, T* buf, size_t n, int tag) {
    return irecv_raw(a, peer, buf, n, scalar_of<T>(), tag);
  }
  // Completes every operation posted up to and including t, in order.
  virtual void wait(Ticket t) = 0;
  virtual void wait_all() = 0;
  // Completes the one operation t (a receive, a send), nothing before it.
  virtual void wait_one(Ticket t) = 0;
  // Completes one of `ts` (0 entries ignored), preferring the earliest
  // listed among those complete; returns its index.
  virtual size_t wait_any(const std::vector<Ticket>& ts) = 0;

  // Whether t has completed (retired tickets have); drives progress, never blocks.
  virtual bool done(Ticket t) = 0;

  // A scalar sum over the whole grid (loss, gradient norm).
  virtual double sum_all(double v) = 0;
  // Sums `n` doubles of every rank onto world rank 0 (reporting, outside the
  // timing); returns whether this rank is rank 0.
  virtual bool sum_to_root(double* buf, size_t n) = 0;
  // Every rank of the grid, after the device's kernels (outside step timing).
  virtual void barrier() = 0;

  CommStats stats;
  // Filled while `tracing` (the MPI communicator; NCCL's records nothing).
  bool tracing = false;
  int trace_step = -1;
  std::vector<CommEvent> events;

 protected:
  virtual void all_reduce_raw(Axis a, void* buf, size_t n, Scalar s, ReduceOp op) = 0;
  virtual void all_gather_raw(Axis a, const void* shard, void* full, size_t shard_n, Scalar s) = 0;
  virtual void reduce_scatter_raw(Axis a, const void* full, void* shard, size_t shard_n, Scalar s) = 0;
  virtual Ticket iall_reduce_raw(Axis a, void* buf, size_t n, Scalar s) = 0;
  virtual Ticket iall_gather_raw(Axis a, const void* shard, void* full, size_t shard_n, Scalar s, Source src) = 0;
  virtual Ticket ireduce_scatter_raw(Axis a, const void* full, void* shard, size_t shard_n, Scalar s,
                                     std::function<void()> on_done) = 0;
  virtual Ticket ireduce_scatter_parts_raw(Axis a, const void* full, void* part, size_t n, Scalar s,
                                           std::function<void()> on_done) = 0;
  virtual void all_gather_parts_raw(Axis a, void* buf, size_t n, Scalar s) = 0;
  virtual Ticket isend_raw(Axis a, int peer, const void* buf, size_t n, Scalar s, int tag) = 0;
  virtual Ticket irecv_raw(Axis a, int peer, void* buf, size_t n, Scalar s, int tag) = 0;

  Grid grid_;
  Coords coords_{};
  Device& device_;
};

}  // namespace ff::engine
