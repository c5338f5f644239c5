#pragma once
// What a collective backend does, so one timing harness drives MPI on CPU
// buffers and NCCL on GPU buffers alike. Buffers hold fp32 (nccl-tests'
// default type); all-reduce and reduce-scatter sum. Pairs (send-recv) and
// the host link are timed by the same harness through the same groups.
#include <mpi.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "advisor/core/collective.hpp"

namespace ff::measure {

using ff::Coll;

// One group's communicator; `comm` is its MPI communicator (ranks in group
// order), the backend may hold more (an NCCL communicator and stream).
struct Group {
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0, size = 1;
  void attach(MPI_Comm c);  // takes ownership of c, reads rank and size
  virtual ~Group();
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;  // "mpi" or "nccl"
  // Every rank of `comm` calls it; the ranks of `comm` are the group.
  virtual std::unique_ptr<Group> make_group(MPI_Comm comm) = 0;
  // Buffers in the backend's memory (host or device), of `count` floats.
  virtual float* alloc(size_t count) = 0;
  virtual void release(float* buf) = 0;
  virtual void upload(float* dst, const float* src, size_t count) = 0;
  virtual void download(float* dst, const float* src, size_t count) = 0;
  // `count` is the per-rank block for all-gather (send count) and
  // reduce-scatter (receive count), the whole buffer for all-reduce. Each
  // call may only enqueue; sync() waits for everything enqueued on `g`.
  // `nonblocking`: the form an overlapping trainer issues (MPI_Iallreduce &
  // co., then a wait), where the library has one apart from the blocking call.
  virtual void run(Coll op, Group& g, const float* send, float* recv, size_t count, bool nonblocking) = 0;
  // Whether run(..., true) differs from run(..., false): NCCL's calls are
  // all asynchronous on a stream, an MPI's non-blocking forms are other code.
  virtual bool has_nonblocking() const = 0;
  // A pipeline stage's exchange with its neighbour: `g` holds 2 ranks, each
  // sends `count` floats to the other and receives as many, both directions
  // in flight at once (MPI_Irecv + MPI_Isend + MPI_Waitall; ncclSend and
  // ncclRecv in one group). May only enqueue, like run().
  virtual void send_recv(Group& g, const float* send, float* recv, size_t count) = 0;
  // The host link (offloaded optimizer state): host memory as a trainer
  // would stage it (pinned with CUDA), and one copy of `count` floats
  // between it and `device` (a buffer from alloc) on `g`, a group of this
  // rank alone. May only enqueue, like run().
  virtual float* alloc_host(size_t count) = 0;
  virtual void release_host(float* buf) = 0;
  virtual void copy_host(Group& g, bool to_device, float* host, float* device, size_t count) = 0;
  // What copy_host times, Measurement::host_link_kind: "cuda-pinned", or
  // "host-memcpy" where there is no GPU and a memcpy stands in.
  virtual std::string host_link_kind() const = 0;
  virtual void sync(Group& g) = 0;
  // Per-iteration times inside a timed loop: stamp(g, i) after the i-th op
  // (stamp 0 before the first), elapsed(g, n) the n gaps in seconds once
  // sync() has returned.
  virtual void stamp(Group& g, int i) = 0;
  virtual std::vector<double> elapsed(Group& g, int n) = 0;
};


// `poll_s` (Δ) > 0: every operation issued non-blocking and waited for by
// MPI_Test + sleep Δ (ff::wait_polling), as a paced engine waits; 0: MPI_Wait
// and the blocking calls.
std::unique_ptr<Backend> make_mpi_backend(double poll_s = 0);
// Null with `why` set when this build has no NCCL or the node has no GPU.
// `node_comm` holds the ranks sharing this host; local rank i drives GPU i.
std::unique_ptr<Backend> make_nccl_backend(MPI_Comm node_comm, std::string* why);
bool nccl_built();
// {"nccl", "cuda"} versions in CUDA builds, {} otherwise.
nlohmann::json cuda_versions();
double gpu_memory_bytes();  // this rank's GPU; 0 when none

}  // namespace ff::measure
