#pragma once
// The timing harness, nccl-tests' conventions (MODEL.md §5): warm-up, then
// `iters` back-to-back operations bracketed by one synchronization, time per
// op, maximum over ranks (after an idle gap: per group, see time_op). Every
// group of a geometry runs at once; ranks in no group join the barriers and
// reductions with nothing to do.
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/runtime/check.hpp"
#include "measure/backend.hpp"

namespace ff::measure {

// Floats each rank passes to Backend::run for a nominal buffer of `bytes`
// (all-gather: output, reduce-scatter: input) in a group of g, rounded down
// as nccl-tests does; 0 when the buffer is smaller than one float per rank.
size_t op_count(Coll op, size_t bytes, int g);
// The buffer size, nccl-tests' way, that `count` actually moves.
double op_bytes(Coll op, size_t count, int g);

// This rank's part in one geometry: its group's communicator (null when the
// geometry leaves it out) and the group's world ranks in ring order. Every
// rank of MPI_COMM_WORLD calls it with the same `groups`.
struct Membership {
  std::unique_ptr<Group> group;
  std::vector<int> members;
};
Membership join_group(Backend& b, const std::vector<std::vector<int>>& groups, int world_rank);

// How every point of a sweep is timed (measure's --warmup, --iters,
// --repeats, --no-check, --gap-us), and where progress lines go (rank 0's
// stderr).
struct SweepOptions {
  int warmup = 5, iters = 20, repeats = 5;
  bool check = true;
  // > 0: each iteration is timed alone, after a barrier and this much idle
  // time, as a paced engine's collectives follow time on its device clock;
  // 0: the iterations back to back.
  double gap_s = 0;
};
using Say = std::function<void(const std::string&)>;

// Back to back: the maximum over all ranks. After a gap: each group's time
// (its slowest member), the mean over the geometry's groups.
struct Timing {
  double per_op_s = 0;            // loop time / iters; after a gap the mean of iter_s
  std::vector<double> iter_s;     // each iteration's time
};

// The one timing loop, over MPI_COMM_WORLD: `issue` enqueues one operation
// on `g` (null on ranks in no group). Back to back (o.gap_s 0) the per-op
// time is the loop's over o.iters; with a gap it is the mean of the
// iterations, each from the end of its gap to its completion, its group's
// maximum over members, then the mean over groups. The warm-up keeps
// one-time costs out of the timing: Open MPI 4.1's all-reduce page-faults
// its scratch buffer on its first two calls at a size (8 MiB of it per call
// at 16 MiB), which a trainer pays once per job, not per step and which a
// loop timed from its first call includes (measure/README.md, busbw).
Timing time_op(Backend& b, Group* g, const std::function<void()>& issue, const SweepOptions& o);
// A collective, a pair's exchange (g of 2 ranks), a host-link copy (g of
// this rank alone), each through time_op.
Timing time_collective(Backend& b, Group* g, Coll op, bool nonblocking, const float* send, float* recv, size_t count,
                       const SweepOptions& o);
Timing time_send_recv(Backend& b, Group* g, const float* send, float* recv, size_t count, const SweepOptions& o);
Timing time_host_copy(Backend& b, Group* g, bool to_device, float* host, float* device, size_t count,
                      const SweepOptions& o);

// Seconds from a common start until the last rank has finished `work`: a
// barrier before and after, for GEMM and memory bandwidth with every rank
// busy. Ranks oversubscribing cores take turns, so a rank's own clock can
// miss the time it waited for a core; the closing barrier cannot. The same
// value on every rank.
template <class Work>
double time_all_ranks(Work&& work) {
  MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
  double t0 = MPI_Wtime();
  work();
  MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
  double local = MPI_Wtime() - t0, worst = 0;
  MPI_CHECK(MPI_Allreduce(&local, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
  return worst;
}

// The contents check nccl-tests runs with -c: every rank fills its send
// buffer with pattern_value(world rank, index), runs `op` once, and compares
// the result element by element with what the members' patterns must give.
// Returns the number of wrong elements on this rank (not reduced).
float pattern_value(int world_rank, size_t index);
long long check_collective(Backend& b, Group& g, Coll op, bool nonblocking, const std::vector<int>& members,
                           float* send, float* recv, size_t count);
// The same for a pair: what arrives must be the partner's pattern.
long long check_send_recv(Backend& b, Group& g, const std::vector<int>& members, float* send, float* recv,
                          size_t count);
// The host link: the pattern copied to the device and back into a host
// buffer overwritten in between must come back unchanged.
long long check_host_copy(Backend& b, Group& g, int world_rank, float* host, float* device, size_t count);

}  // namespace ff::measure
