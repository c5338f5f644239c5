// Pairs (send-recv) and the host link: which ranks pair up, against lists
// written out by hand; every message arriving as the partner sent it; and
// the sweep measure runs, on 2 nodes of 2 ranks. Expectations come from the
// definitions (rank r pairs with r + stride in blocks of 2·stride inside a
// node; across nodes, local rank j of node 2i with local rank j of node
// 2i + 1, j < pairs per node), not from measure's own check.
#include <doctest/doctest.h>
#include <mpi.h>

#include <cmath>
#include <set>
#include <vector>

#include "advisor/core/measurement.hpp"
#include "measure/backend.hpp"
#include "measure/groups.hpp"
#include "measure/harness.hpp"
#include "measure/host_link.hpp"
#include "measure/p2p.hpp"
#include "tests/measure/world.hpp"

using Groups = std::vector<std::vector<int>>;

namespace {

using fftest::value;
using fftest::world_rank;
using fftest::world_size;

ff::Geometry intra(long long stride) { return ff::Geometry{false, stride, 2, 1}; }
ff::Geometry inter(int pairs) { return ff::Geometry{true, 1, 2, pairs}; }

// The partner of `r`, or -1 when the geometry leaves it out, by the definition.
int partner(const ff::Geometry& g, int r, int ranks, int per_node) {
  int node = r / per_node, local = r % per_node, nodes = ranks / per_node;
  if (!g.inter) {
    int s = int(g.stride), block = local / (2 * s);
    if ((block + 1) * 2 * s > per_node) return -1;  // the node's tail sits out
    return local % (2 * s) < s ? r + s : r - s;
  }
  if (local >= g.groups_per_node || (node ^ 1) >= nodes) return -1;
  return (node ^ 1) * per_node + local;
}

const ff::measure::Say quiet = [](const std::string&) {};

}  // namespace

TEST_CASE("pair geometries: the 2-rank groups, by hand") {
  using ff::measure::geometry_groups;
  CHECK(geometry_groups(intra(1), 4, 2) == Groups{{0, 1}, {2, 3}});
  CHECK(geometry_groups(inter(1), 4, 2) == Groups{{0, 2}});
  CHECK(geometry_groups(inter(2), 4, 2) == Groups{{0, 2}, {1, 3}});
  CHECK(geometry_groups(intra(2), 8, 4) == Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}});
  CHECK(geometry_groups(intra(1), 6, 3) == Groups{{0, 1}, {3, 4}});  // rank 2 of each node sits out
  CHECK(geometry_groups(inter(3), 6, 3) == Groups{{0, 3}, {1, 4}, {2, 5}});
  // 3 nodes of 1: nodes 0 and 1 pair up, node 2 sits out.
  CHECK(geometry_groups(inter(1), 3, 1) == Groups{{0, 1}});
  // Pairs among the default geometries: every stride with 2·stride <= per node, then
  // 1 .. per node pairs sharing a node (size 2 across, one member a node).
  auto names = [](int ranks, int per_node) {
    std::vector<std::string> out;
    for (const auto& g : ff::measure::pair_geometries(ff::measure::default_geometries(ranks, per_node)))
      out.push_back(ff::measure::pair_name(g));
    return out;
  };
  CHECK(names(4, 2) == std::vector<std::string>{"send-recv  intra stride 1", "send-recv  inter 1 pairs/node",
                                                "send-recv  inter 2 pairs/node"});
  CHECK(names(8, 4) == std::vector<std::string>{"send-recv  intra stride 1", "send-recv  intra stride 2",
                                                "send-recv  inter 1 pairs/node", "send-recv  inter 2 pairs/node",
                                                "send-recv  inter 3 pairs/node", "send-recv  inter 4 pairs/node"});
  CHECK(names(2, 2) == std::vector<std::string>{"send-recv  intra stride 1"});
}

TEST_CASE("send-recv on every pair geometry delivers each rank its partner's data, both ways at once") {
  auto backend = ff::measure::make_mpi_backend();
  int me = world_rank(), size = world_size(), exchanged = 0;
  for (int per_node = 1; per_node <= size; ++per_node) {
    if (size % per_node) continue;
    for (const auto& g : ff::measure::pair_geometries(ff::measure::default_geometries(size, per_node))) {
      CAPTURE(per_node);
      CAPTURE(ff::measure::pair_name(g));
      ff::measure::Membership m = ff::measure::join_group(*backend, ff::measure::geometry_groups(g, size, per_node), me);
      int expect = partner(g, me, size, per_node);
      CHECK((m.group != nullptr) == (expect >= 0));
      if (!m.group) continue;
      REQUIRE(m.group->size == 2);
      CHECK(m.members[size_t(1 - m.group->rank)] == expect);
      for (size_t count : {size_t(1), size_t(1000), size_t(300000)}) {  // eager and rendezvous
        std::vector<float> send(count), recv(count, -1);
        for (size_t i = 0; i < count; ++i) send[i] = value(me, i);
        backend->send_recv(*m.group, send.data(), recv.data(), count);
        int wrong = 0;
        for (size_t i = 0; i < count; ++i) wrong += recv[i] != value(expect, i);
        CHECK(wrong == 0);
        ++exchanged;
      }
    }
  }
  CHECK(exchanged > 0);
}

TEST_CASE("p2p sweep on 2 nodes of 2 ranks: intra and inter rows, positive finite times, messages intact") {
  REQUIRE(world_size() == 4);
  auto backend = ff::measure::make_mpi_backend();
  int me = world_rank();
  auto pairs = ff::measure::pair_geometries(ff::measure::default_geometries(4, 2));
  std::vector<size_t> sizes = {1024, 8192, 65536};
  ff::measure::SweepOptions o{1, 3, 2, true};  // warm-up 1, 3 iterations, 2 repeats, contents checked
  ff::measure::PairResults r = ff::measure::measure_send_recv(*backend, pairs, sizes, me, 4, 2, o, quiet);
  REQUIRE(r.samples.size() == 3 * 3);
  std::set<std::pair<bool, long long>> geometries;
  for (const auto& s : r.samples) {
    CAPTURE(s.bytes);
    geometries.insert({s.geometry.inter, s.geometry.inter ? s.geometry.groups_per_node : s.geometry.stride});
    CHECK(s.geometry.size == 2);
    CHECK(s.iters == 3);
    REQUIRE(s.times_s.size() == 2);
    for (double t : s.times_s) CHECK((t > 0 && std::isfinite(t)));
  }
  CHECK(geometries == std::set<std::pair<bool, long long>>{{false, 1}, {true, 1}, {true, 2}});
  // The same maxima on every rank (rank 0 writes the record).
  double mine = r.samples.back().times_s.back(), lo = 0, hi = 0;
  MPI_Allreduce(&mine, &lo, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&mine, &hi, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  CHECK(lo == hi);
  REQUIRE(r.table.size() == 9);
  CHECK(r.table[0].head == "send-recv  intra stride 1");
  CHECK(r.table[0].at_once == "2 pairs at once, both directions");
  CHECK(r.table[3].at_once == "1 pair at once, both directions");
  CHECK(r.table[8].at_once == "2 pairs at once, both directions");
  CHECK(r.table[8].count == 16384);
  // The record: one row per (geometry, size), bytes one rank sends, algbw = busbw = bytes / time.
  ff::Measurement m;
  m.p2p = r.samples;
  nlohmann::json j = ff::to_json(m)["p2p"];
  REQUIRE(j.size() == 9);
  CHECK(j[3]["tier"] == "inter");
  CHECK(j[3]["pairs_per_node"] == 1);
  CHECK(j[8]["busbw_GBps"].get<double>() == doctest::Approx(65536 / r.samples[8].median_s() / 1e9));
  // measure's own check also catches a pair that delivers nothing.
  ff::measure::Membership g = ff::measure::join_group(*backend, {{0, 2}, {1, 3}}, me);
  float* send = backend->alloc(1024);
  float* recv = backend->alloc(1024);
  CHECK(ff::measure::check_send_recv(*backend, *g.group, g.members, send, recv, 1024) == 0);
  backend->release(send);
  backend->release(recv);
}

TEST_CASE("host link (memcpy stand-in on CPU ranks): one rank alone and every rank at once, each way") {
  auto backend = ff::measure::make_mpi_backend();
  int size = world_size(), per_node = size;  // one node of every rank
  CHECK(backend->host_link_kind() == "host-memcpy");
  ff::measure::HostLinkResults r =
      ff::measure::measure_host_link(*backend, {4096, 1 << 20}, world_rank(), size, per_node, {1, 3, 2, true}, quiet);
  REQUIRE(r.samples.size() == 2 * 2 * 2);  // (alone, all) × (h2d, d2h) × 2 sizes
  CHECK(r.samples[0].gpus == 1);
  CHECK(r.samples[0].to_device);
  CHECK(!r.samples[2].to_device);
  CHECK(r.samples[4].gpus == size);
  for (const auto& s : r.samples)
    for (double t : s.times_s) CHECK((t > 0 && std::isfinite(t)));
  // The round trip the check runs, by hand on this rank's own group.
  ff::measure::Membership self = ff::measure::join_group(*backend, {{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}}, world_rank());
  REQUIRE(self.group);
  float* host = backend->alloc_host(1000);
  float* device = backend->alloc(1000);
  for (size_t i = 0; i < 1000; ++i) host[i] = value(world_rank(), i);
  backend->copy_host(*self.group, true, host, device, 1000);
  for (size_t i = 0; i < 1000; ++i) host[i] = -1;
  backend->copy_host(*self.group, false, host, device, 1000);
  backend->sync(*self.group);
  int wrong = 0;
  for (size_t i = 0; i < 1000; ++i) wrong += host[i] != value(world_rank(), i);
  CHECK(wrong == 0);
  backend->release_host(host);
  backend->release(device);
}
