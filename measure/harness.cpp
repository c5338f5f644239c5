#include "measure/harness.hpp"

#include <algorithm>
#include <numeric>

#include "engine/runtime/check.hpp"
#include "engine/runtime/mpi_poll.hpp"

namespace ff::measure {

size_t op_count(Coll op, size_t bytes, int g) {
  size_t floats = bytes / sizeof(float);
  return op == Coll::AllReduce ? floats : floats / size_t(g);
}

double op_bytes(Coll op, size_t count, int g) {
  double per_rank = double(count) * sizeof(float);
  return op == Coll::AllReduce ? per_rank : per_rank * g;
}

Membership join_group(Backend& b, const std::vector<std::vector<int>>& groups, int world_rank) {
  Membership m;
  int color = MPI_UNDEFINED, key = 0;
  for (size_t i = 0; i < groups.size(); ++i)
    for (size_t j = 0; j < groups[i].size(); ++j)
      if (groups[i][j] == world_rank) color = int(i), key = int(j), m.members = groups[i];
  // key = position in the group, so the communicator's ranks follow the ring order.
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, color, key, &comm));
  if (comm != MPI_COMM_NULL) m.group = b.make_group(comm);
  return m;
}

namespace {

// Each iteration alone: a barrier, the idle gap, then the operation to its
// completion on this rank. The barrier's own messages are over before the
// gap ends, so the links are as quiet as between a paced engine's kernels.
// An iteration's time is its group's (the slowest member's), then the mean
// over the geometry's groups: a training step sums many collectives, so each
// group's own time adds up, not the slowest of several groups in each
// iteration (1.6x more for 4 intra-node pairs; measure/README.md).
std::vector<double> time_each_after_gap(Backend& b, Group* g, const std::function<void()>& issue,
                                        const SweepOptions& o) {
  std::vector<double> local(size_t(o.iters), 0.0);
  for (int i = 0; i < o.iters; ++i) {
    MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    ff::sleep_for(o.gap_s);
    if (!g) continue;
    double t0 = MPI_Wtime();
    issue();
    b.sync(*g);
    local[size_t(i)] = MPI_Wtime() - t0;
  }
  // [each iteration's group time, groups]: counted once a group, by its rank 0.
  std::vector<double> group(size_t(o.iters) + 1, 0.0);
  if (g) {
    MPI_CHECK(MPI_Allreduce(local.data(), group.data(), o.iters, MPI_DOUBLE, MPI_MAX, g->comm));
    if (g->rank != 0) std::fill(group.begin(), group.end(), 0.0);
    else group.back() = 1;
  }
  std::vector<double> sum(group.size());
  MPI_CHECK(MPI_Allreduce(group.data(), sum.data(), int(sum.size()), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
  double groups = std::max(sum.back(), 1.0);
  for (int i = 0; i < o.iters; ++i) local[size_t(i)] = sum[size_t(i)] / groups;
  return local;
}

}  // namespace

Timing time_op(Backend& b, Group* g, const std::function<void()>& issue, const SweepOptions& o) {
  if (g) {
    for (int i = 0; i < o.warmup; ++i) issue();
    b.sync(*g);
  }
  // Start together: concurrent groups must compete for links as in training.
  MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
  Timing t;
  if (o.gap_s > 0) {
    t.iter_s = time_each_after_gap(b, g, issue, o);
    t.per_op_s = std::accumulate(t.iter_s.begin(), t.iter_s.end(), 0.0) / o.iters;
    return t;
  }
  std::vector<double> local(size_t(o.iters) + 1, 0.0);  // [loop time, each iteration]
  if (g) {
    double t0 = MPI_Wtime();
    b.stamp(*g, 0);
    for (int i = 0; i < o.iters; ++i) {
      issue();
      b.stamp(*g, i + 1);
    }
    b.sync(*g);
    local[0] = MPI_Wtime() - t0;
    std::vector<double> gaps = b.elapsed(*g, o.iters);
    for (int i = 0; i < o.iters; ++i) local[size_t(i) + 1] = gaps[size_t(i)];
  }
  std::vector<double> worst(local.size());
  MPI_CHECK(MPI_Allreduce(local.data(), worst.data(), int(local.size()), MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
  t.iter_s.assign(worst.begin() + 1, worst.end());
  t.per_op_s = worst[0] / o.iters;
  return t;
}

Timing time_collective(Backend& b, Group* g, Coll op, bool nonblocking, const float* send, float* recv, size_t count,
                       const SweepOptions& o) {
  return time_op(b, g, [&] { b.run(op, *g, send, recv, count, nonblocking); }, o);
}

Timing time_send_recv(Backend& b, Group* g, const float* send, float* recv, size_t count, const SweepOptions& o) {
  return time_op(b, g, [&] { b.send_recv(*g, send, recv, count); }, o);
}

Timing time_host_copy(Backend& b, Group* g, bool to_device, float* host, float* device, size_t count,
                      const SweepOptions& o) {
  return time_op(b, g, [&] { b.copy_host(*g, to_device, host, device, count); }, o);
}

// Small integers, so sums over any group size we run are exact in fp32.
float pattern_value(int world_rank, size_t index) { return float((world_rank * 131 + index * 7) % 251); }

long long check_collective(Backend& b, Group& g, Coll op, bool nonblocking, const std::vector<int>& members,
                           float* send, float* recv, size_t count) {
  int me = members[size_t(g.rank)];
  size_t in = op == Coll::ReduceScatter ? count * g.size : count;
  size_t out = op == Coll::AllGather ? count * g.size : count;
  std::vector<float> host(std::max(in, out));
  for (size_t i = 0; i < in; ++i) host[i] = pattern_value(me, i);
  b.upload(send, host.data(), in);
  // So a collective that writes nothing is caught; an all-reduce's buffer
  // holds the input instead (a backend may reduce it in place).
  std::vector<float> junk(out, -1.0f);
  b.upload(recv, op == Coll::AllReduce ? host.data() : junk.data(), out);
  b.run(op, g, send, recv, count, nonblocking);
  b.sync(g);
  b.download(host.data(), recv, out);
  long long wrong = 0;
  for (size_t i = 0; i < out; ++i) {
    float expect = 0;
    if (op == Coll::AllGather) {
      expect = pattern_value(members[i / count], i % count);
    } else {
      size_t index = op == Coll::ReduceScatter ? size_t(g.rank) * count + i : i;
      for (int m : members) expect += pattern_value(m, index);
    }
    wrong += host[i] != expect;
  }
  return wrong;
}

long long check_send_recv(Backend& b, Group& g, const std::vector<int>& members, float* send, float* recv,
                          size_t count) {
  int me = members[size_t(g.rank)], partner = members[size_t(1 - g.rank)];
  std::vector<float> host(count);
  for (size_t i = 0; i < count; ++i) host[i] = pattern_value(me, i);
  b.upload(send, host.data(), count);
  std::vector<float> junk(count, -1.0f);
  b.upload(recv, junk.data(), count);
  b.send_recv(g, send, recv, count);
  b.sync(g);
  b.download(host.data(), recv, count);
  long long wrong = 0;
  for (size_t i = 0; i < count; ++i) wrong += host[i] != pattern_value(partner, i);
  return wrong;
}

long long check_host_copy(Backend& b, Group& g, int world_rank, float* host, float* device, size_t count) {
  for (size_t i = 0; i < count; ++i) host[i] = pattern_value(world_rank, i);
  b.copy_host(g, true, host, device, count);
  b.sync(g);
  std::fill(host, host + count, -1.0f);
  b.copy_host(g, false, host, device, count);
  b.sync(g);
  long long wrong = 0;
  for (size_t i = 0; i < count; ++i) wrong += host[i] != pattern_value(world_rank, i);
  return wrong;
}

}  // namespace ff::measure
