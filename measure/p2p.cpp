#include "measure/p2p.hpp"

#include <cstdint>
#include <stdexcept>

#include "engine/runtime/check.hpp"
#include "measure/groups.hpp"

namespace ff::measure {

std::string pair_name(const ff::Geometry& g) {
  if (g.inter) return "send-recv  inter " + std::to_string(g.groups_per_node) + " pairs/node";
  return "send-recv  intra stride " + std::to_string(g.stride);
}

std::vector<ff::Geometry> pair_geometries(const std::vector<ff::Geometry>& geometries) {
  std::vector<ff::Geometry> out;
  for (const auto& g : geometries)
    if (g.size == 2 && g.members_per_node == 1 && g.node_stride == 1) out.push_back(g);
  return out;
}

PairResults measure_send_recv(Backend& b, const std::vector<ff::Geometry>& pairs, const std::vector<size_t>& sizes,
                              int rank, int ranks, int per_node, const SweepOptions& o, const Say& say) {
  struct Run {
    ff::Geometry geometry;
    size_t pairs = 0;
    Membership mine;
  };
  std::vector<Run> runs;
  for (const auto& g : pairs) {
    auto groups = geometry_groups(g, ranks, per_node);
    runs.push_back({g, groups.size(), join_group(b, groups, rank)});
  }
  size_t max_floats = sizes.back() / sizeof(float);
  float* send = b.alloc(max_floats);
  float* recv = b.alloc(max_floats);

  if (o.check) {
    for (auto& r : runs)
      for (size_t bytes : {sizes.front(), sizes.back()}) {
        long long wrong = 0, total = 0;
        if (r.mine.group)
          wrong = check_send_recv(b, *r.mine.group, r.mine.members, send, recv, bytes / sizeof(float));
        MPI_CHECK(MPI_Allreduce(&wrong, &total, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD));
        if (total > 0)
          throw std::runtime_error(pair_name(r.geometry) + " at " + std::to_string(bytes) + " bytes: " +
                                   std::to_string(total) + " wrong elements received; the " + b.name() +
                                   " library or this machine is broken");
      }
    say("contents checked: every pair geometry, both directions, at " + std::to_string(sizes.front()) + " and " +
        std::to_string(sizes.back()) + " bytes");
  }

  PairResults out;
  for (const auto& r : runs)
    for (size_t bytes : sizes) {
      ff::P2PSample s;
      s.geometry = r.geometry;
      s.bytes = double(bytes);
      s.iters = o.iters;
      out.samples.push_back(s);
      TableRow t;
      t.head = pair_name(r.geometry);
      t.at_once = std::to_string(r.pairs) + " pair" + (r.pairs == 1 ? "" : "s") + " at once, both directions";
      t.bytes = double(bytes);
      t.count = bytes / sizeof(float);
      t.iters = o.iters;
      out.table.push_back(t);
    }
  // Repeats outermost, as the collectives: a noisy minute spoils one repeat of many points.
  int step = 0, steps = o.repeats * int(runs.size());
  double start = MPI_Wtime();
  for (int rep = 0; rep < o.repeats; ++rep)
    for (size_t gi = 0; gi < runs.size(); ++gi) {
      for (size_t si = 0; si < sizes.size(); ++si) {
        size_t i = gi * sizes.size() + si;
        Timing t = time_send_recv(b, runs[gi].mine.group.get(), send, recv, out.table[i].count, o);
        out.samples[i].times_s.push_back(t.per_op_s);
        out.table[i].times_s.push_back(t.per_op_s);
        out.table[i].iterations.insert(out.table[i].iterations.end(), t.iter_s.begin(), t.iter_s.end());
      }
      const auto& last = out.samples[gi * sizes.size() + sizes.size() - 1];
      char line[256];
      std::snprintf(line, sizeof line, "[p2p %d/%d] %s, repeat %d/%d: %zu .. %zu bytes, %.3g GB/s each way at %zu (%.0f s)",
                    ++step, steps, pair_name(runs[gi].geometry).c_str(), rep + 1, o.repeats, sizes.front(),
                    sizes.back(), last.bytes / last.times_s.back() / 1e9, sizes.back(), MPI_Wtime() - start);
      say(line);
    }
  b.release(send);
  b.release(recv);
  return out;
}

}  // namespace ff::measure
