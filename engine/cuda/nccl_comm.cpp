#include "engine/cuda/nccl_comm.hpp"

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstring>
#include <string>

#include "engine/cuda/cuda_device.hpp"
#include "engine/mpi_comm.hpp"
#include "engine/runtime/check.hpp"
#include "engine/runtime/clock.hpp"
#include "engine/runtime/cuda_check.hpp"
#include "engine/runtime/gpu.hpp"

namespace ff::engine {

namespace {

ncclDataType_t nccl_type(Scalar s) {
  switch (s) {
    case Scalar::F32: return ncclFloat;
    case Scalar::F64: return ncclDouble;
    case Scalar::BF16: return ncclBfloat16;
  }
  FF_FATAL("nccl_type: Scalar " + std::to_string(int(s)));
}
ncclRedOp_t nccl_op(ReduceOp op) { return op == ReduceOp::Max ? ncclMax : ncclSum; }

void copy_bytes(const void* from, void* to, size_t n, Scalar s, cudaStream_t st) {
  if (from != to && n) CUDA_CHECK(cudaMemcpyAsync(to, from, n * scalar_bytes(s), cudaMemcpyDefault, st));
}

}  // namespace

NcclComm::NcclComm(MPI_Comm world, const Grid& grid, const Order& order, CudaDevice& device)
    : Comm(grid, coords_of(grid, order, rank_in(world)), device), gpu_(device), world_(world),
      axis_mpi_(split_axes(world, grid, order, coords_)) {
  auto open = [](MPI_Comm c) {
    Lane l;
    l.comm = cuda::nccl_comm_of(c);
    CUDA_CHECK(cudaStreamCreateWithFlags(&l.stream, cudaStreamNonBlocking));
    return l;
  };
  for (Axis a : kAxes)
    if (a != Axis::P && size(a) > 1) lanes_[int(a)] = open(axis_mpi_[int(a)]);
  if (size(Axis::P) > 1)
    for (auto& dir : stage_lanes_)
      for (Lane& l : dir) l = open(axis_mpi_[int(Axis::P)]);
  device.set_progress(this);
}

NcclComm::~NcclComm() {
  device_.set_progress(nullptr);
  auto close = [](Lane& l) {
    if (!l.comm) return;
    cudaStreamSynchronize(l.stream);
    ncclCommDestroy(l.comm);
    cudaStreamDestroy(l.stream);
  };
  for (Lane& l : lanes_) close(l);
  for (auto& dir : stage_lanes_)
    for (Lane& l : dir) close(l);
  for (auto* q : {&inflight_, &p2p_})
    for (Op& op : *q) cudaEventDestroy(op.event);
  for (cudaEvent_t e : spare_) cudaEventDestroy(e);
  for (MPI_Comm& c : axis_mpi_) MPI_Comm_free(&c);
}

cudaEvent_t NcclComm::event() {
  if (spare_.empty()) {
    cudaEvent_t e;
    CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    return e;
  }
  cudaEvent_t e = spare_.back();
  spare_.pop_back();
  return e;
}

// The lane's stream waits for the compute stream (the data is the kernels'),
// then runs `call`; an event after it is the ticket.
template <class Call>
Comm::Ticket NcclComm::enqueue(Axis a, const Lane& lane, double bytes, bool p2p, Call call,
                               std::function<void()> on_done) {
  const double t0 = now_s();
  cudaEvent_t ready = event();
  CUDA_CHECK(cudaEventRecord(ready, gpu_.stream()));
  CUDA_CHECK(cudaStreamWaitEvent(lane.stream, ready, 0));
  spare_.push_back(ready);  // a recorded event may be recorded again: the wait captured this one
  call(lane.comm, lane.stream);
  cudaEvent_t done = event();
  CUDA_CHECK(cudaEventRecord(done, lane.stream));
  stats.bytes[int(a)] += bytes;
  stats.blocked_s[int(a)] += now_s() - t0;
  const Ticket id = next_ticket_++;
  (p2p ? p2p_ : inflight_).push_back({id, a, done, now_s(), false, std::move(on_done)});
  return id;
}

// A size-1 axis: the operation is a copy on the compute stream, done at once.
Comm::Ticket NcclComm::local(const void* from, void* to, size_t n, Scalar s, const std::function<void()>& on_done) {
  copy_bytes(from, to, n, s, gpu_.stream());
  if (on_done) on_done();
  return 0;
}

bool NcclComm::test(Op& op) {
  if (op.done) return true;
  const cudaError_t q = cudaEventQuery(op.event);
  if (q == cudaErrorNotReady) return false;
  CUDA_CHECK(q);
  op.done = true;
  stats.inflight_s += now_s() - op.posted;
  return true;
}

// Callbacks run in posting order, as MpiComm runs them.
void NcclComm::retire_done() {
  for (auto it = p2p_.begin(); it != p2p_.end();) {
    if (!it->done) {
      ++it;
      continue;
    }
    spare_.push_back(it->event);
    it = p2p_.erase(it);
  }
  while (!inflight_.empty() && inflight_.front().done) {
    Op op = std::move(inflight_.front());
    inflight_.pop_front();
    spare_.push_back(op.event);
    if (op.on_done) op.on_done();
  }
}

void NcclComm::progress() {
  for (auto* q : {&inflight_, &p2p_})
    for (Op& op : *q) test(op);
  if (!in_wait_) retire_done();
}

bool NcclComm::done(Ticket t) {
  progress();
  const Op* op = find(t);
  return !op || op->done;
}

NcclComm::Op* NcclComm::find(Ticket t) {
  for (auto* q : {&inflight_, &p2p_})
    for (Op& op : *q)
      if (op.id == t) return &op;
  return nullptr;
}

// The host waits for every collective posted up to t, in order, each wait
// blocked on that operation's axis.
void NcclComm::wait(Ticket t) {
  if (t == 0) return;
  in_wait_ = true;
  for (size_t i = 0; i < inflight_.size() && inflight_[i].id <= t; ++i) {
    const double t0 = now_s();
    while (!test(inflight_[i])) progress();
    const double waited = now_s() - t0;
    stats.blocked_s[int(inflight_[i].axis)] += waited;
    stats.nonblocking_exposed_s += waited;
  }
  in_wait_ = false;
  retire_done();
}

void NcclComm::wait_all() {
  if (!inflight_.empty()) wait(inflight_.back().id);
}

void NcclComm::blocking(Ticket t) {
  Op* op = find(t);
  if (!op) return;
  const Axis axis = op->axis;
  const double t0 = now_s();
  in_wait_ = true;
  while (!test(*find(t))) progress();
  in_wait_ = false;
  stats.blocked_s[int(axis)] += now_s() - t0;
  retire_done();
}

void NcclComm::wait_one(Ticket t) {
  if (t) blocking(t);
}

size_t NcclComm::wait_any(const std::vector<Ticket>& ts) {
  const double t0 = now_s();
  for (;;) {
    progress();
    for (size_t i = 0; i < ts.size(); ++i) {
      if (ts[i] == 0) continue;
      const Op* op = find(ts[i]);
      if (!op || op->done) {
        stats.blocked_s[int(Axis::P)] += now_s() - t0;
        retire_done();
        return i;
      }
    }
  }
}

void NcclComm::all_reduce_raw(Axis a, void* buf, size_t n, Scalar s, ReduceOp op) {
  if (size(a) == 1 || n == 0) return;
  blocking(enqueue(a, lanes_[int(a)], double(n * scalar_bytes(s)), false, [&](ncclComm* c, cudaStream_t st) {
    NCCL_CHECK(ncclAllReduce(buf, buf, n, nccl_type(s), nccl_op(op), c, st));
  }));
}

void NcclComm::all_gather_raw(Axis a, const void* shard, void* full, size_t shard_n, Scalar s) {
  if (size(a) == 1) return (void)local(shard, full, shard_n, s, {});
  blocking(iall_gather_raw(a, shard, full, shard_n, s, Source::Device));
}

void NcclComm::reduce_scatter_raw(Axis a, const void* full, void* shard, size_t shard_n, Scalar s) {
  if (size(a) == 1) return (void)local(full, shard, shard_n, s, {});
  blocking(ireduce_scatter_raw(a, full, shard, shard_n, s, {}));
}

Comm::Ticket NcclComm::iall_reduce_raw(Axis a, void* buf, size_t n, Scalar s) {
  if (size(a) == 1 || n == 0) return 0;
  return enqueue(a, lanes_[int(a)], double(n * scalar_bytes(s)), false, [&](ncclComm* c, cudaStream_t st) {
    NCCL_CHECK(ncclAllReduce(buf, buf, n, nccl_type(s), ncclSum, c, st));
  });
}

// On a GPU every operation waits for the kernels before it: the wait is a
// stream dependency, not the host's, so a weight's prefetch loses nothing.
Comm::Ticket NcclComm::iall_gather_raw(Axis a, const void* shard, void* full, size_t shard_n, Scalar s, Source) {
  if (size(a) == 1) return local(shard, full, shard_n, s, {});
  return enqueue(a, lanes_[int(a)], double(shard_n * size(a) * scalar_bytes(s)), false,
                 [&](ncclComm* c, cudaStream_t st) {
                   NCCL_CHECK(ncclAllGather(shard, full, shard_n, nccl_type(s), c, st));
                 });
}

Comm::Ticket NcclComm::ireduce_scatter_raw(Axis a, const void* full, void* shard, size_t shard_n, Scalar s,
                                           std::function<void()> on_done) {
  if (size(a) == 1) return local(full, shard, shard_n, s, on_done);
  return enqueue(
      a, lanes_[int(a)], double(shard_n * size(a) * scalar_bytes(s)), false,
      [&](ncclComm* c, cudaStream_t st) {
        NCCL_CHECK(ncclReduceScatter(full, shard, shard_n, nccl_type(s), ncclSum, c, st));
      },
      std::move(on_done));
}

// Uneven parts: NCCL's reduce-scatter takes equal ones, so one reduce per
// part onto its owner, grouped into one operation.
Comm::Ticket NcclComm::ireduce_scatter_parts_raw(Axis a, const void* full, void* part, size_t n, Scalar s,
                                                 std::function<void()> on_done) {
  if (size(a) == 1) return local(full, part, n, s, on_done);
  const int g = size(a);
  const char* from = static_cast<const char*>(full);
  const size_t b = scalar_bytes(s);
  return enqueue(
      a, lanes_[int(a)], double(n * b), false,
      [&](ncclComm* c, cudaStream_t st) {
        NCCL_CHECK(ncclGroupStart());
        for (int i = 0; i < g; ++i) {
          const size_t lo = part_begin(n, g, i), k = part_begin(n, g, i + 1) - lo;
          NCCL_CHECK(ncclReduce(from + lo * b, part, k, nccl_type(s), ncclSum, i, c, st));
        }
        NCCL_CHECK(ncclGroupEnd());
      },
      std::move(on_done));
}

// In place, uneven parts: each owner broadcasts its part.
void NcclComm::all_gather_parts_raw(Axis a, void* buf, size_t n, Scalar s) {
  if (size(a) == 1) return;
  const int g = size(a);
  char* p = static_cast<char*>(buf);
  const size_t b = scalar_bytes(s);
  blocking(enqueue(a, lanes_[int(a)], double(n * b), false, [&](ncclComm* c, cudaStream_t st) {
    NCCL_CHECK(ncclGroupStart());
    for (int i = 0; i < g; ++i) {
      const size_t lo = part_begin(n, g, i), k = part_begin(n, g, i + 1) - lo;
      NCCL_CHECK(ncclBroadcast(p + lo * b, p + lo * b, k, nccl_type(s), i, c, st));
    }
    NCCL_CHECK(ncclGroupEnd());
  }));
}

const NcclComm::Lane& NcclComm::stage_lane(int from, int to) const {
  return stage_lanes_[to > from ? 0 : 1][from % 2];
}

// NCCL has no tags: on a lane the messages between two stages match in
// posting order, which is micro-batch order on both sides.
Comm::Ticket NcclComm::isend_raw(Axis a, int peer, const void* buf, size_t n, Scalar s, int) {
  return enqueue(a, stage_lane(coord(a), peer), double(n * scalar_bytes(s)), true,
                 [&](ncclComm* c, cudaStream_t st) { NCCL_CHECK(ncclSend(buf, n, nccl_type(s), peer, c, st)); });
}

Comm::Ticket NcclComm::irecv_raw(Axis a, int peer, void* buf, size_t n, Scalar s, int) {
  return enqueue(a, stage_lane(peer, coord(a)), 0, true,
                 [&](ncclComm* c, cudaStream_t st) { NCCL_CHECK(ncclRecv(buf, n, nccl_type(s), peer, c, st)); });
}

double NcclComm::sum_all(double v) {
  device_.synchronize();
  const double t0 = now_s();
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_DOUBLE, MPI_SUM, world_));
  stats.sync_s += now_s() - t0;
  return v;
}

bool NcclComm::sum_to_root(double* buf, size_t n) {
  device_.synchronize();
  const bool root = rank_in(world_) == 0;
  MPI_CHECK(MPI_Reduce(root ? MPI_IN_PLACE : buf, root ? buf : nullptr, int(n), MPI_DOUBLE, MPI_SUM, 0, world_));
  return root;
}

void NcclComm::barrier() {
  wait_all();
  device_.synchronize();
  MPI_CHECK(MPI_Barrier(world_));
}

}  // namespace ff::engine
