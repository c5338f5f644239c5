// The MPI backend: host buffers, each call complete before it returns
// (non-blocking forms are waited for at once), so sync() has nothing to wait for.
// Its "device" is host memory, so its host link is a memcpy standing in.
// With a poll interval Δ > 0 every timed operation is issued non-blocking and
// waited for by MPI_Test + sleep Δ, as a paced engine's ranks wait (MODEL.md §11):
// a sleeping rank makes no MPI progress, so Δ is part of what the links cost.
#include <cstdlib>
#include <cstring>

#include "engine/runtime/check.hpp"
#include "engine/runtime/mpi_poll.hpp"
#include "measure/backend.hpp"

namespace ff::measure {

void Group::attach(MPI_Comm c) {
  comm = c;
  MPI_CHECK(MPI_Comm_rank(comm, &rank));
  MPI_CHECK(MPI_Comm_size(comm, &size));
}

Group::~Group() {
  if (comm != MPI_COMM_NULL) MPI_Comm_free(&comm);
}

namespace {

class MpiBackend : public Backend {
 public:
  explicit MpiBackend(double poll_s) : poll_s_(poll_s) {
    if (poll_s_ > 0) ff::set_fine_timer_slack();  // else each sleep of Δ rounds up by the default 50 µs
  }
  std::string name() const override { return "mpi"; }

  std::unique_ptr<Group> make_group(MPI_Comm comm) override {
    auto g = std::make_unique<Group>();
    g->attach(comm);
    return g;
  }

  float* alloc(size_t count) override {
    // Page-aligned and touched, so first-touch page faults stay out of the timings.
    void* p = nullptr;
    if (posix_memalign(&p, 4096, count * sizeof(float) + 4096) != 0) FF_FATAL("out of host memory");
    std::memset(p, 0, count * sizeof(float));
    return static_cast<float*>(p);
  }
  void release(float* buf) override { std::free(buf); }
  void upload(float* dst, const float* src, size_t count) override { std::memcpy(dst, src, count * sizeof(float)); }
  void download(float* dst, const float* src, size_t count) override { std::memcpy(dst, src, count * sizeof(float)); }

  bool has_nonblocking() const override { return true; }
  // All-reduces run in place on `recv` (check_collective loads the input
  // there), as the engine (and a framework's gradient buffer) issues them:
  // Open MPI's non-blocking in-place all-reduce (libnbc) takes another path,
  // 3x slower at 64 KiB across the emulated nodes than out of place.
  void run(Coll op, Group& g, const float* send, float* recv, size_t count, bool nonblocking) override {
    int n = int(count);  // counts beyond 2^31 are rejected by --max-bytes
    // Polling: the blocking form too, since a paced engine issues no blocking call.
    if (nonblocking || poll_s_ > 0) {
      MPI_Request req;
      switch (op) {
        case Coll::AllReduce: MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, recv, n, MPI_FLOAT, MPI_SUM, g.comm, &req)); break;
        case Coll::AllGather: MPI_CHECK(MPI_Iallgather(send, n, MPI_FLOAT, recv, n, MPI_FLOAT, g.comm, &req)); break;
        case Coll::ReduceScatter:
          MPI_CHECK(MPI_Ireduce_scatter_block(send, recv, n, MPI_FLOAT, MPI_SUM, g.comm, &req));
          break;
      }
      ff::wait_polling(&req, poll_s_);
      return;
    }
    switch (op) {
      case Coll::AllReduce: MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, recv, n, MPI_FLOAT, MPI_SUM, g.comm)); break;
      case Coll::AllGather: MPI_CHECK(MPI_Allgather(send, n, MPI_FLOAT, recv, n, MPI_FLOAT, g.comm)); break;
      case Coll::ReduceScatter:
        MPI_CHECK(MPI_Reduce_scatter_block(send, recv, n, MPI_FLOAT, MPI_SUM, g.comm));
        break;
    }
  }
  void send_recv(Group& g, const float* send, float* recv, size_t count) override {
    // Receive posted first, so neither side's send waits for the other's
    // receive to appear (Open MPI's rendezvous above the eager limit).
    int peer = 1 - g.rank, n = int(count);
    MPI_Request req[2];
    MPI_CHECK(MPI_Irecv(recv, n, MPI_FLOAT, peer, 0, g.comm, &req[0]));
    MPI_CHECK(MPI_Isend(send, n, MPI_FLOAT, peer, 0, g.comm, &req[1]));
    ff::waitall_polling(2, req, poll_s_);
  }

  float* alloc_host(size_t count) override { return alloc(count); }
  void release_host(float* buf) override { release(buf); }
  void copy_host(Group&, bool to_device, float* host, float* device, size_t count) override {
    if (to_device) std::memcpy(device, host, count * sizeof(float));
    else std::memcpy(host, device, count * sizeof(float));
  }
  std::string host_link_kind() const override { return "host-memcpy"; }

  void sync(Group&) override {}

  // Blocking calls: the wall clock after each one is when it finished here.
  void stamp(Group&, int i) override {
    if (size_t(i) >= stamps_.size()) stamps_.resize(size_t(i) + 1);
    stamps_[size_t(i)] = MPI_Wtime();
  }
  std::vector<double> elapsed(Group&, int n) override {
    std::vector<double> gaps;
    for (int i = 0; i < n; ++i) gaps.push_back(stamps_[size_t(i) + 1] - stamps_[size_t(i)]);
    return gaps;
  }

 private:
  double poll_s_ = 0;  // Δ; 0 waits in MPI_Wait(all)
  std::vector<double> stamps_;
};

}  // namespace

std::unique_ptr<Backend> make_mpi_backend(double poll_s) { return std::make_unique<MpiBackend>(poll_s); }

}  // namespace ff::measure
