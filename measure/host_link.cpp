#include "measure/host_link.hpp"

#include <cstdio>
#include <stdexcept>

#include "engine/runtime/check.hpp"

namespace ff::measure {

HostLinkResults measure_host_link(Backend& b, const std::vector<size_t>& sizes, int rank, int ranks, int per_node,
                                  const SweepOptions& o, const Say& say) {
  // Each copying rank is a group of its own: the copies are independent, and
  // the group carries the backend's stream and per-iteration stamps.
  struct Run {
    int gpus = 1;  // of a node, copying at once
    Membership mine;
  };
  std::vector<Run> runs;
  runs.push_back({1, join_group(b, {{0}}, rank)});
  if (per_node > 1) {
    std::vector<std::vector<int>> everyone;
    for (int r = 0; r < ranks; ++r) everyone.push_back({r});
    runs.push_back({per_node, join_group(b, everyone, rank)});
  }
  size_t max_floats = sizes.back() / sizeof(float);
  float* host = b.alloc_host(max_floats);
  float* device = b.alloc(max_floats);
  std::string what = b.host_link_kind() == "host-memcpy" ? "memcpy stand-in" : "pinned";

  if (o.check) {
    long long wrong = 0, total = 0;
    if (runs.back().mine.group) wrong = check_host_copy(b, *runs.back().mine.group, rank, host, device, max_floats);
    MPI_CHECK(MPI_Allreduce(&wrong, &total, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD));
    if (total > 0)
      throw std::runtime_error("host link: " + std::to_string(total) + " wrong elements after a round trip of " +
                               std::to_string(sizes.back()) + " bytes; this machine is broken");
  }

  HostLinkResults out;
  for (const auto& r : runs)
    for (bool h2d : {true, false})
      for (size_t bytes : sizes) {
        ff::HostLinkSample s;
        s.to_device = h2d;
        s.gpus = r.gpus;
        s.bytes = double(bytes);
        s.iters = o.iters;
        out.samples.push_back(s);
        TableRow t;
        t.head = std::string("host link ") + (h2d ? "h2d" : "d2h") + " (" + what + ")  " + std::to_string(r.gpus) +
                 " GPU" + (r.gpus == 1 ? "" : "s") + " of a node";
        t.at_once = r.gpus == 1 ? "rank 0 alone" : "every rank at once";
        t.bytes = double(bytes);
        t.count = bytes / sizeof(float);
        t.iters = o.iters;
        out.table.push_back(t);
      }
  int step = 0, steps = o.repeats * int(runs.size()) * 2;
  double start = MPI_Wtime();
  for (int rep = 0; rep < o.repeats; ++rep)
    for (size_t ri = 0; ri < runs.size(); ++ri)
      for (int d = 0; d < 2; ++d) {
        bool h2d = d == 0;
        for (size_t si = 0; si < sizes.size(); ++si) {
          size_t i = (ri * 2 + size_t(d)) * sizes.size() + si;
          Timing t = time_host_copy(b, runs[ri].mine.group.get(), h2d, host, device, out.table[i].count, o);
          out.samples[i].times_s.push_back(t.per_op_s);
          out.table[i].times_s.push_back(t.per_op_s);
          out.table[i].iterations.insert(out.table[i].iterations.end(), t.iter_s.begin(), t.iter_s.end());
        }
        const auto& last = out.samples[(ri * 2 + size_t(d)) * sizes.size() + sizes.size() - 1];
        char line[256];
        std::snprintf(line, sizeof line, "[host %d/%d] %s, %d GPU%s of a node, repeat %d/%d: %.3g GB/s each at %zu bytes (%.0f s)",
                      ++step, steps, h2d ? "h2d" : "d2h", runs[ri].gpus, runs[ri].gpus == 1 ? "" : "s", rep + 1,
                      o.repeats, last.bytes / last.times_s.back() / 1e9, sizes.back(), MPI_Wtime() - start);
        say(line);
      }
  b.release_host(host);
  b.release(device);
  return out;
}

}  // namespace ff::measure
