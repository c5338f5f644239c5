#include "engine/mpi_comm.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "engine/runtime/clock.hpp"
#include "engine/runtime/mpi_poll.hpp"

namespace ff::engine {

namespace {

// MPI has no bfloat16. Its values travel as a 2-byte type of their own, not
// MPI_UINT16_T, so that a predefined op given them by mistake is an error
// (MPI_ERR_OP) rather than an integer sum of bit patterns; and they reduce
// through user ops that compute in float and round back to nearest even.
// The float sum of two bf16 values rounded again to bf16 is their correctly
// rounded bf16 sum (float's 24 bits are at least 2·8 + 2, so the double
// rounding is innocuous): the sum a GPU's bf16 add gives.
void bf16_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  const bf16* a = static_cast<const bf16*>(in);
  bf16* b = static_cast<bf16*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = float(a[i]) + float(b[i]);
}

// fmax's rule, NCCL's too (fmaxf, or __hmax): a NaN loses to a number, so
// the result does not depend on the order the ranks' values meet in, as it
// would with MPI_MAX's a > b ? a : b.
void bf16_max(void* in, void* inout, int* len, MPI_Datatype*) {
  const bf16* a = static_cast<const bf16*>(in);
  bf16* b = static_cast<bf16*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = std::fmax(float(a[i]), float(b[i]));
}

struct Bf16Mpi {
  MPI_Datatype type;
  MPI_Op sum, max;
};

// Freed by MPI_Finalize itself, which deletes MPI_COMM_SELF's attributes
// before anything else (MPI-3.1 §8.7.1): MpiComm's lifetime is no guide, as
// several may come and go, and ops held by a static outlive them all.
int free_bf16(MPI_Comm, int, void* attr, void*) {
  auto* m = static_cast<Bf16Mpi*>(attr);
  int err = MPI_Op_free(&m->sum);
  if (err == MPI_SUCCESS) err = MPI_Op_free(&m->max);
  if (err == MPI_SUCCESS) err = MPI_Type_free(&m->type);
  return err;
}

// Made on first use by a bf16 operation, not before: the calls are local,
// so ranks need not agree on when, and an fp32 run makes none.
const Bf16Mpi& bf16_mpi() {
  static Bf16Mpi m{};
  static const bool made = [] {
    MPI_CHECK(MPI_Type_contiguous(2, MPI_BYTE, &m.type));
    MPI_CHECK(MPI_Type_commit(&m.type));
    MPI_CHECK(MPI_Op_create(bf16_sum, 1, &m.sum));
    MPI_CHECK(MPI_Op_create(bf16_max, 1, &m.max));
    int key = MPI_KEYVAL_INVALID;
    MPI_CHECK(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, free_bf16, &key, nullptr));
    MPI_CHECK(MPI_Comm_set_attr(MPI_COMM_SELF, key, &m));
    MPI_CHECK(MPI_Comm_free_keyval(&key));  // the attribute lives on until MPI_COMM_SELF goes
    return true;
  }();
  (void)made;
  return m;
}

}  // namespace

MPI_Datatype mpi_type(Scalar s) {
  switch (s) {
    case Scalar::F32: return MPI_FLOAT;
    case Scalar::F64: return MPI_DOUBLE;
    case Scalar::BF16: return bf16_mpi().type;
  }
  FF_FATAL("mpi_type: Scalar " + std::to_string(int(s)));
}

MPI_Op mpi_op(ReduceOp op, Scalar s) {
  if (s == Scalar::BF16) return op == ReduceOp::Max ? bf16_mpi().max : bf16_mpi().sum;
  return op == ReduceOp::Max ? MPI_MAX : MPI_SUM;
}

int rank_in(MPI_Comm c) {
  int r = 0;
  MPI_CHECK(MPI_Comm_rank(c, &r));
  return r;
}

PerAxis<MPI_Comm> split_axes(MPI_Comm world, const Grid& grid, const Order& order, const Coords& coords) {
  PerAxis<MPI_Comm> comms{};
  for (Axis a : kAxes) {
    // Members of one group agree on every other coordinate: the rank of the
    // member at coordinate 0 names the group; the coordinate orders it.
    Coords first = coords;
    first[int(a)] = 0;
    int color = int(rank_of(grid, order, first));
    MPI_CHECK(MPI_Comm_split(world, color, coords[int(a)], &comms[int(a)]));
  }
  return comms;
}

namespace {

void copy_bytes(const void* from, void* to, size_t n, Scalar s) {
  if (from != to) std::memcpy(to, from, n * scalar_bytes(s));
}

}  // namespace

MpiComm::MpiComm(MPI_Comm world, const Grid& grid, const Order& order, Device& device, double poll_s)
    : Comm(grid, coords_of(grid, order, rank_in(world)), device), world_(world), world_rank_(rank_in(world)),
      poll_s_(poll_s), axis_comm_(split_axes(world, grid, order, coords_)) {
  device.set_progress(this);
}

MpiComm::~MpiComm() {
  device_.set_progress(nullptr);
  for (MPI_Comm& c : axis_comm_) MPI_Comm_free(&c);
}

void MpiComm::account(Axis a, double bytes, double seconds) {
  stats.bytes[int(a)] += bytes;
  stats.blocked_s[int(a)] += seconds;
}

// A blocking operation after the device's kernels: the library's blocking
// call, or when waiting polls, the non-blocking `start` completed by polling
// (other algorithms in Open MPI: the form `measure --poll-us` times).
template <class Start, class Call>
MpiComm::BlockedSpan MpiComm::run_blocking(Start start, Call call) {
  BlockedSpan span;
  span.ready_s = now_s();
  device_.synchronize();
  span.start_s = now_s();
  if (poll_s_ > 0) {
    MPI_Request req;
    start(&req);
    complete(&req);
  } else {
    call();
  }
  span.end_s = now_s();
  return span;
}

template <class Start, class Call>
void MpiComm::run_blocking(Axis a, double bytes, Start start, Call call) {
  const BlockedSpan span = run_blocking(start, call);
  account(a, bytes, span.seconds());
  if (tracing) trace(a, CommEvent::Blocking, bytes, span.ready_s, span.start_s, span.end_s);
}

long MpiComm::trace(Axis a, CommEvent::Kind kind, double bytes, double ready_s, double start_s, double end_s) {
  events.push_back({trace_step, a, kind, bytes, ready_s, start_s, end_s});
  return long(events.size()) - 1;
}

void MpiComm::mark_done(Inflight& op) {
  if (op.done) return;
  op.done = true;
  if (op.event >= 0) events[size_t(op.event)].end_s = now_s();
}

// A non-blocking collective, after the device's kernels unless its data
// came from the host; a ticket to wait on.
template <class Start>
Comm::Ticket MpiComm::start_collective(Axis a, double bytes, bool after_device, Start start,
                                       std::function<void()> on_done, std::vector<int> counts) {
  if (after_device) device_.synchronize();
  const double t0 = now_s();
  MPI_Request req;
  start(&req);
  account(a, bytes, now_s() - t0);
  return post(a, bytes, req, std::move(on_done), std::move(counts));
}

// A size-1 axis: the operation is a copy, done at once.
Comm::Ticket MpiComm::local(const void* from, void* to, size_t n, Scalar s, const std::function<void()>& on_done) {
  copy_bytes(from, to, n, s);
  if (on_done) on_done();
  return 0;
}

// The whole wait is the caller's: the tests of other operations made
// meanwhile are not accounted to their axes as well.
double MpiComm::complete(MPI_Request* req) {
  const double t0 = now_s();
  if (poll_s_ <= 0) {
    MPI_CHECK(MPI_Wait(req, MPI_STATUS_IGNORE));
    return now_s() - t0;
  }
  const PerAxis<double> blocked = stats.blocked_s;
  const double exposed = stats.nonblocking_exposed_s;
  for (;;) {
    int flag = 0;
    MPI_CHECK(MPI_Test(req, &flag, MPI_STATUS_IGNORE));
    if (flag) break;
    progress();
    sleep_for(poll_s_);
  }
  stats.blocked_s = blocked;
  stats.nonblocking_exposed_s = exposed;
  return now_s() - t0;
}

void MpiComm::all_reduce_raw(Axis a, void* buf, size_t n, Scalar s, ReduceOp op) {
  if (size(a) == 1 || n == 0) return;
  MPI_Comm c = axis_comm_[int(a)];
  run_blocking(
      a, double(n * scalar_bytes(s)),
      [&](MPI_Request* r) { MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, buf, int(n), mpi_type(s), mpi_op(op, s), c, r)); },
      [&] { MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, buf, int(n), mpi_type(s), mpi_op(op, s), c)); });
}

void MpiComm::all_gather_raw(Axis a, const void* shard, void* full, size_t shard_n, Scalar s) {
  if (size(a) == 1) return copy_bytes(shard, full, shard_n, s);
  MPI_Comm c = axis_comm_[int(a)];
  const int k = int(shard_n);
  run_blocking(
      a, double(shard_n * size(a) * scalar_bytes(s)),
      [&](MPI_Request* r) { MPI_CHECK(MPI_Iallgather(shard, k, mpi_type(s), full, k, mpi_type(s), c, r)); },
      [&] { MPI_CHECK(MPI_Allgather(shard, k, mpi_type(s), full, k, mpi_type(s), c)); });
}

void MpiComm::reduce_scatter_raw(Axis a, const void* full, void* shard, size_t shard_n, Scalar s) {
  if (size(a) == 1) return copy_bytes(full, shard, shard_n, s);
  MPI_Comm c = axis_comm_[int(a)];
  const int k = int(shard_n);
  run_blocking(
      a, double(shard_n * size(a) * scalar_bytes(s)),
      [&](MPI_Request* r) { MPI_CHECK(MPI_Ireduce_scatter_block(full, shard, k, mpi_type(s), mpi_op(ReduceOp::Sum, s), c, r)); },
      [&] { MPI_CHECK(MPI_Reduce_scatter_block(full, shard, k, mpi_type(s), mpi_op(ReduceOp::Sum, s), c)); });
}

Comm::Ticket MpiComm::post(Axis a, double bytes, MPI_Request req, std::function<void()> on_done,
                          std::vector<int> counts) {
  Ticket id = next_ticket_++;
  const double t = now_s();
  const long ev = tracing ? trace(a, CommEvent::NonBlocking, bytes, t, t, -1) : -1;
  inflight_.push_back({id, a, req, t, false, ev, std::move(on_done), std::move(counts)});
  return id;
}

Comm::Ticket MpiComm::post_p2p(Axis a, double bytes, MPI_Request req) {
  Ticket id = next_ticket_++;
  const double t = now_s();
  const long ev = tracing ? trace(a, CommEvent::Message, bytes, t, t, -1) : -1;
  p2p_.push_back({id, a, req, t, false, ev, {}, {}});
  return id;
}

std::vector<int> MpiComm::part_counts(Axis a, size_t n, std::vector<int>* displs) const {
  const int g = size(a);
  std::vector<int> counts(static_cast<size_t>(g));
  if (displs) displs->resize(size_t(g));
  for (int i = 0; i < g; ++i) {
    counts[size_t(i)] = int(part_begin(n, g, i + 1) - part_begin(n, g, i));
    if (displs) (*displs)[size_t(i)] = int(part_begin(n, g, i));
  }
  return counts;
}

Comm::Ticket MpiComm::ireduce_scatter_parts_raw(Axis a, const void* full, void* part, size_t n, Scalar s,
                                                std::function<void()> on_done) {
  if (size(a) == 1) return local(full, part, n, s, on_done);
  std::vector<int> counts = part_counts(a, n);
  const int* k = counts.data();  // its buffer moves with the vector into the operation's entry
  return start_collective(
      a, double(n * scalar_bytes(s)), true,
      [&](MPI_Request* r) {
        MPI_CHECK(MPI_Ireduce_scatter(full, part, k, mpi_type(s), mpi_op(ReduceOp::Sum, s), axis_comm_[int(a)], r));
      },
      std::move(on_done), std::move(counts));
}

void MpiComm::all_gather_parts_raw(Axis a, void* buf, size_t n, Scalar s) {
  if (size(a) == 1) return;
  std::vector<int> displs, counts = part_counts(a, n, &displs);
  MPI_Comm c = axis_comm_[int(a)];
  auto start = [&](MPI_Request* r) {
    MPI_CHECK(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, counts.data(), displs.data(), mpi_type(s), c, r));
  };
  run_blocking(a, double(n * scalar_bytes(s)), start, [&] {
    MPI_CHECK(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, counts.data(), displs.data(), mpi_type(s), c));
  });
}

Comm::Ticket MpiComm::iall_reduce_raw(Axis a, void* buf, size_t n, Scalar s) {
  if (size(a) == 1 || n == 0) return 0;
  return start_collective(a, double(n * scalar_bytes(s)), true, [&](MPI_Request* r) {
    MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, buf, int(n), mpi_type(s), mpi_op(ReduceOp::Sum, s), axis_comm_[int(a)], r));
  });
}

Comm::Ticket MpiComm::iall_gather_raw(Axis a, const void* shard, void* full, size_t shard_n, Scalar s, Source src) {
  if (size(a) == 1) return local(shard, full, shard_n, s, {});
  const int k = int(shard_n);
  return start_collective(a, double(shard_n * size(a) * scalar_bytes(s)), src == Source::Device, [&](MPI_Request* r) {
    MPI_CHECK(MPI_Iallgather(shard, k, mpi_type(s), full, k, mpi_type(s), axis_comm_[int(a)], r));
  });
}

Comm::Ticket MpiComm::ireduce_scatter_raw(Axis a, const void* full, void* shard, size_t shard_n, Scalar s,
                                          std::function<void()> on_done) {
  if (size(a) == 1) return local(full, shard, shard_n, s, on_done);
  const int k = int(shard_n);
  return start_collective(
      a, double(shard_n * size(a) * scalar_bytes(s)), true,
      [&](MPI_Request* r) {
        MPI_CHECK(MPI_Ireduce_scatter_block(full, shard, k, mpi_type(s), mpi_op(ReduceOp::Sum, s), axis_comm_[int(a)],
                                            r));
      },
      std::move(on_done));
}

// Completion callbacks run in posting order, so accumulation into the
// gradient shards happens in the same order as on the blocking path.
void MpiComm::retire_done() {
  for (auto it = p2p_.begin(); it != p2p_.end();) it = it->done ? p2p_.erase(it) : it + 1;
  while (!inflight_.empty() && inflight_.front().done) {
    Inflight op = std::move(inflight_.front());
    inflight_.pop_front();
    if (op.on_done) op.on_done();
  }
}

bool MpiComm::done(Ticket t) {
  progress();
  const Inflight* op = find(t);
  return !op || op->done;
}

void MpiComm::progress() {
  test_inflight();
  if (!in_wait_) retire_done();
}

// The non-blocking statistics are the collectives' (the overlap flags'); a
// pipeline's messages are accounted by the time blocked for them.
void MpiComm::test_inflight() {
  for (auto* q : {&inflight_, &p2p_}) {
    const bool collective = q == &inflight_;
    for (Inflight& op : *q) {
      if (op.done) continue;
      double t0 = now_s();
      int flag = 0;
      MPI_CHECK(MPI_Test(&op.req, &flag, MPI_STATUS_IGNORE));
      double dt = now_s() - t0;
      stats.blocked_s[int(op.axis)] += dt;
      if (collective) stats.nonblocking_exposed_s += dt;
      if (flag) {
        mark_done(op);
        if (collective) stats.inflight_s += now_s() - op.posted;
      }
    }
  }
}

void MpiComm::wait(Ticket t) {
  if (t == 0) return;
  // By index: complete() may progress (and mark done) the others meanwhile;
  // nothing is retired until the loop is over.
  in_wait_ = true;
  for (size_t i = 0; i < inflight_.size() && inflight_[i].id <= t; ++i) {
    if (inflight_[i].done) continue;
    const Axis axis = inflight_[i].axis;
    const double waited = complete(&inflight_[i].req);
    Inflight& op = inflight_[i];
    stats.blocked_s[int(axis)] += waited;
    stats.nonblocking_exposed_s += waited;
    if (!op.done) stats.inflight_s += now_s() - op.posted;
    mark_done(op);
  }
  in_wait_ = false;
  retire_done();
}

Comm::Ticket MpiComm::isend_raw(Axis a, int peer, const void* buf, size_t n, Scalar s, int tag) {
  device_.synchronize();
  const double t0 = now_s();
  MPI_Request req;
  MPI_CHECK(MPI_Isend(buf, int(n), mpi_type(s), peer, tag, axis_comm_[int(a)], &req));
  account(a, double(n * scalar_bytes(s)), now_s() - t0);
  return post_p2p(a, double(n * scalar_bytes(s)), req);
}

Comm::Ticket MpiComm::irecv_raw(Axis a, int peer, void* buf, size_t n, Scalar s, int tag) {
  const double t0 = now_s();
  MPI_Request req;
  MPI_CHECK(MPI_Irecv(buf, int(n), mpi_type(s), peer, tag, axis_comm_[int(a)], &req));
  account(a, 0, now_s() - t0);  // a message's bytes are counted once, by its sender
  return post_p2p(a, 0, req);
}

MpiComm::Inflight* MpiComm::find(Ticket t) {
  for (auto* q : {&inflight_, &p2p_})
    for (Inflight& op : *q)
      if (op.id == t) return &op;
  return nullptr;  // completed and retired already
}

void MpiComm::complete_op(Inflight& op) {
  if (op.done) return;
  const Axis axis = op.axis;
  const Ticket id = op.id;
  in_wait_ = true;
  const double waited = complete(&op.req);
  in_wait_ = false;
  Inflight* o = find(id);  // complete() progressed the others, which retires nothing while in_wait_
  stats.blocked_s[int(axis)] += waited;
  mark_done(*o);
}

void MpiComm::wait_one(Ticket t) {
  if (t == 0) return;
  if (Inflight* op = find(t)) complete_op(*op);
  retire_done();
}

size_t MpiComm::wait_any(const std::vector<Ticket>& ts) {
  const double t0 = now_s();
  const PerAxis<double> blocked = stats.blocked_s;  // as in complete(): the wait is the caller's
  const double exposed = stats.nonblocking_exposed_s;
  Axis axis = Axis::P;
  for (Ticket t : ts)
    if (const Inflight* op = t ? find(t) : nullptr) {
      axis = op->axis;
      break;
    }
  for (;;) {
    test_inflight();
    for (size_t i = 0; i < ts.size(); ++i) {
      if (ts[i] == 0) continue;
      const Inflight* op = find(ts[i]);
      if (!op || op->done) {
        stats.blocked_s = blocked;
        stats.nonblocking_exposed_s = exposed;
        stats.blocked_s[int(axis)] += now_s() - t0;
        retire_done();
        return i;
      }
    }
    if (poll_s_ > 0) sleep_for(poll_s_);
  }
}

void MpiComm::wait_all() {
  if (!inflight_.empty()) wait(inflight_.back().id);
}

double MpiComm::sum_all(double v) {
  const BlockedSpan span = run_blocking(
      [&](MPI_Request* r) { MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, &v, 1, MPI_DOUBLE, MPI_SUM, world_, r)); },
      [&] { MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_DOUBLE, MPI_SUM, world_)); });
  stats.sync_s += span.seconds();
  return v;
}

bool MpiComm::sum_to_root(double* buf, size_t n) {
  device_.synchronize();
  const bool root = world_rank_ == 0;
  MPI_CHECK(MPI_Reduce(root ? MPI_IN_PLACE : buf, root ? buf : nullptr, int(n), MPI_DOUBLE, MPI_SUM, 0, world_));
  return root;
}

void MpiComm::barrier() {
  device_.synchronize();
  MPI_Request req;
  MPI_CHECK(MPI_Ibarrier(world_, &req));
  complete(&req);
}

}  // namespace ff::engine
