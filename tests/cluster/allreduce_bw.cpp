// allreduce_bw: what an emulated cluster (examples/cluster/emulate.sh) looks
// like from inside MPI, and the bus bandwidth of an all-reduce across it.
//
//   allreduce_bw [--bytes B] [--iters N] [--warmup N] [--split world|local] [--active K]
//
// --split world: one group, all ranks. --split local: one group per local rank
// (ranks with the same MPI_COMM_TYPE_SHARED rank), i.e. groups that span every
// node with one member each, so the R groups of an R-ranks-per-node cluster
// share every node's link. --active K: only the first K groups run (the
// others wait), to compare one group alone on the links with K sharing them.
//
// Prints, from rank 0, "key=value" lines:
//   ranks=8 nodes=4 ranks_per_node=2 block=1   (from MPI_Comm_split_type(SHARED))
//   group=0 size=4 bytes=8388608 time_s=... busbw_mbit=...   (one per active group)
//   min_busbw_mbit=...
// time: the median over iterations of the slowest rank's time for one
// all-reduce. busbw follows nccl-tests: bytes / time · 2(g−1)/g, here in
// Mbit/s (10^6 bit) to compare with a tc rate. Exits 1 on a usage error or a wrong result.
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1  // Open MPI's deprecated C++ bindings only bring warnings
#endif
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

struct Options {
  long long bytes = 8 << 20;
  int iters = 5, warmup = 1, active = -1;
  std::string split = "world";
};

bool parse(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (i + 1 >= argc) return false;
    std::string v = argv[++i];
    char* end = nullptr;
    long long n = std::strtoll(v.c_str(), &end, 10);
    bool num = *end == '\0' && n >= 0;
    if (a == "--bytes" && num && n >= 4) o.bytes = n;
    else if (a == "--iters" && num && n >= 1) o.iters = int(n);
    else if (a == "--warmup" && num) o.warmup = int(n);
    else if (a == "--active" && num && n >= 1) o.active = int(n);
    else if (a == "--split" && (v == "world" || v == "local")) o.split = v;
    else return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, ranks = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  Options o;
  if (!parse(argc, argv, o)) {
    if (rank == 0)
      std::fprintf(stderr, "usage: allreduce_bw [--bytes B] [--iters N] [--warmup N] [--split world|local] [--active K]\n");
    MPI_Finalize();
    return 1;
  }

  // The nodes as MPI sees them: one per shared-memory domain.
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
  int local = 0, per_node = 0;
  MPI_Comm_rank(node, &local);
  MPI_Comm_size(node, &per_node);
  int leaders = local == 0 ? 1 : 0, nodes = 0, lo = 0, hi = 0, block = 0;
  MPI_Allreduce(&leaders, &nodes, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(&per_node, &lo, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&per_node, &hi, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  // Block placement: rank r is local rank r mod n on node r / n.
  int mine_block = (lo == hi && rank % lo == local) ? 1 : 0;
  MPI_Allreduce(&mine_block, &block, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
  if (rank == 0)
    std::printf("ranks=%d nodes=%d ranks_per_node=%d%s block=%d\n", ranks, nodes, lo,
                lo == hi ? "" : "(uneven)", block);

  int color = o.split == "world" ? 0 : local;
  int groups = o.split == "world" ? 1 : hi;
  int active = o.active < 0 ? groups : std::min(o.active, groups);
  MPI_Comm group;
  MPI_Comm_split(MPI_COMM_WORLD, color, rank, &group);
  int g = 0, grank = 0;
  MPI_Comm_size(group, &g);
  MPI_Comm_rank(group, &grank);

  size_t count = size_t(o.bytes) / sizeof(float);
  std::vector<float> send(count), recv(count);
  for (size_t i = 0; i < count; ++i) send[i] = float((i % 7) + grank);
  double t = 0;
  bool ok = true;
  MPI_Barrier(MPI_COMM_WORLD);
  if (color < active) {
    for (int i = 0; i < o.warmup; ++i) MPI_Allreduce(send.data(), recv.data(), int(count), MPI_FLOAT, MPI_SUM, group);
    // Each iteration timed on its own, the slowest rank's time kept, and the
    // median over iterations reported: one stall (another job taking the
    // cores) does not decide the answer.
    std::vector<double> mine(size_t(o.iters)), slowest(size_t(o.iters));
    for (int i = 0; i < o.iters; ++i) {
      MPI_Barrier(group);
      double t0 = MPI_Wtime();
      MPI_Allreduce(send.data(), recv.data(), int(count), MPI_FLOAT, MPI_SUM, group);
      mine[size_t(i)] = MPI_Wtime() - t0;
    }
    MPI_Allreduce(mine.data(), slowest.data(), o.iters, MPI_DOUBLE, MPI_MAX, group);
    std::sort(slowest.begin(), slowest.end());
    size_t h = slowest.size() / 2;
    t = slowest.size() % 2 ? slowest[h] : 0.5 * (slowest[h - 1] + slowest[h]);
    // sum over grank of (i % 7 + grank): exact in float for these sizes.
    for (size_t i = 0; i < count; i += 997)
      ok = ok && recv[i] == float(g * (i % 7)) + float(g * (g - 1) / 2);
  }
  MPI_Barrier(MPI_COMM_WORLD);

  // Each active group's time, gathered to rank 0 from the group's rank 0.
  double mbit = 0;
  if (color < active && g > 1) mbit = double(o.bytes) / t * 2.0 * (g - 1) / g * 8 / 1e6;
  const size_t world = size_t(ranks);
  std::vector<double> times(world), rates(world);
  double report_t = (color < active && grank == 0) ? t : -1, report_r = mbit;
  MPI_Gather(&report_t, 1, MPI_DOUBLE, times.data(), 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  MPI_Gather(&report_r, 1, MPI_DOUBLE, rates.data(), 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  std::vector<int> colors(world);
  MPI_Gather(&color, 1, MPI_INT, colors.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  int all_ok = 0, my_ok = ok ? 1 : 0;
  MPI_Allreduce(&my_ok, &all_ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
  if (rank == 0) {
    double min_rate = -1;
    for (int r = 0; r < ranks; ++r) {
      if (times[size_t(r)] < 0) continue;
      std::printf("group=%d size=%d bytes=%lld time_s=%.6f busbw_mbit=%.1f\n", colors[size_t(r)], g, o.bytes,
                  times[size_t(r)], rates[size_t(r)]);
      min_rate = min_rate < 0 ? rates[size_t(r)] : std::min(min_rate, rates[size_t(r)]);
    }
    std::printf("min_busbw_mbit=%.1f\n", min_rate);
    if (!all_ok) std::fprintf(stderr, "allreduce_bw: wrong all-reduce result\n");
  }
  MPI_Comm_free(&group);
  MPI_Comm_free(&node);
  MPI_Finalize();
  return all_ok ? 0 : 1;
}
