// interleave: what a collective costs when the ranks compute between calls,
// as in training, against the back-to-back loop `measure` times. Ranks that
// share cores (the emulated cluster puts 8 on 2) make the two differ.
//
//   interleave [--bytes B] [--iters N] [--compute-us U[,U...]]
//
// Two groupings of the ranks, both running at once as in a grid:
//   node  — one group per node (MPI_COMM_TYPE_SHARED): shared memory
//   cross — one group per local rank, one member on every node: the links
// For each U (microseconds of CPU time of work per rank, as timed by rank 0
// before the loops), four loops of N iterations, each iteration U of work then:
//   node:  an all-reduce of B bytes in the node group
//   cross: an all-reduce of B bytes in the cross group
//   both:  U of work, node all-reduce, U of work, cross all-reduce
//   work:  the work alone (twice for "both")
// Prints, from rank 0, one line per U:
//   compute_us=U node_ms=… cross_ms=… both_ms=… work_ms=… work2_ms=…
// each the slowest rank's loop time per iteration. node_ms − work_ms is what a
// node all-reduce adds to a step; compare with compute_us=0. Exits 1 on a
// usage error or a wrong all-reduce result.
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>
#include <vector>

namespace {

struct Options {
  long long bytes = 32768;
  int iters = 40;
  std::vector<long long> compute_us = {0, 100, 300, 1000, 3000};
};

bool parse(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (i + 1 >= argc) return false;
    std::string v = argv[++i];
    auto number = [](const std::string& s, long long& n) {
      char* end = nullptr;
      n = std::strtoll(s.c_str(), &end, 10);
      return !s.empty() && *end == '\0' && n >= 0;
    };
    long long n = 0;
    if (a == "--bytes" && number(v, n) && n >= 4) o.bytes = n;
    else if (a == "--iters" && number(v, n) && n >= 1) o.iters = int(n);
    else if (a == "--compute-us") {
      o.compute_us.clear();
      for (size_t at = 0; at <= v.size();) {
        size_t comma = v.find(',', at);
        if (comma == std::string::npos) comma = v.size();
        if (!number(v.substr(at, comma - at), n)) return false;
        o.compute_us.push_back(n);
        at = comma + 1;
      }
    } else return false;
  }
  return true;
}

// CPU work the compiler cannot drop: a recurrence on a value that is printed
// if it ever hits zero.
double work(long long steps, double x) {
  for (long long i = 0; i < steps; ++i) x = x * 1.0000001 + 1e-9;
  return x;
}

double cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

// Loop time per iteration of the slowest rank.
template <typename Body>
double seconds_per_iteration(int iters, Body body) {
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  for (int i = 0; i < iters; ++i) body();
  double mine = (MPI_Wtime() - t0) / iters, slowest = 0;
  MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return slowest;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  Options o;
  if (!parse(argc, argv, o)) {
    if (rank == 0) std::fprintf(stderr, "usage: interleave [--bytes B] [--iters N] [--compute-us U[,U...]]\n");
    MPI_Finalize();
    return 1;
  }
  MPI_Comm node, cross;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
  int local = 0;
  MPI_Comm_rank(node, &local);
  MPI_Comm_split(MPI_COMM_WORLD, local, rank, &cross);

  // Work steps per microsecond of rank 0's own CPU time: wall time would
  // count the time other ranks hold the core.
  double x = 1, steps_per_us = 0;
  if (rank == 0) {
    const long long n = 50'000'000;
    double t0 = cpu_seconds();
    x = work(n, x);
    steps_per_us = double(n) / ((cpu_seconds() - t0) * 1e6);
  }
  MPI_Bcast(&steps_per_us, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);

  // Each rank sends its place in the group plus one, so every element of a
  // sum is g(g+1)/2: a lost or garbled message shows.
  size_t count = size_t(o.bytes) / sizeof(float);
  int node_size = 0, cross_size = 0, node_rank = 0, cross_rank = 0;
  MPI_Comm_size(node, &node_size);
  MPI_Comm_size(cross, &cross_size);
  MPI_Comm_rank(node, &node_rank);
  MPI_Comm_rank(cross, &cross_rank);
  std::vector<float> node_send(count, float(node_rank + 1)), cross_send(count, float(cross_rank + 1));
  std::vector<float> node_sum(count), cross_sum(count);
  bool ok = true;
  auto clear = [&] {
    std::fill(node_sum.begin(), node_sum.end(), 0.0f);
    std::fill(cross_sum.begin(), cross_sum.end(), 0.0f);
  };
  auto check = [&](const std::vector<float>& sum, int g) {
    for (size_t i = 0; i < count; i += 61) ok = ok && sum[i] == float(g * (g + 1) / 2);
    ok = ok && sum[count - 1] == float(g * (g + 1) / 2);
  };
  for (long long us : o.compute_us) {
    const long long steps = (long long)(double(us) * steps_per_us);
    auto node_ar = [&] {
      MPI_Allreduce(node_send.data(), node_sum.data(), int(count), MPI_FLOAT, MPI_SUM, node);
    };
    auto cross_ar = [&] {
      MPI_Allreduce(cross_send.data(), cross_sum.data(), int(count), MPI_FLOAT, MPI_SUM, cross);
    };
    clear();  // before every checked loop: a sum left from the last one must not pass
    double t_node = seconds_per_iteration(o.iters, [&] { x = work(steps, x); node_ar(); });
    check(node_sum, node_size);
    double t_cross = seconds_per_iteration(o.iters, [&] { x = work(steps, x); cross_ar(); });
    check(cross_sum, cross_size);
    clear();
    double t_both = seconds_per_iteration(o.iters, [&] {
      x = work(steps, x);
      node_ar();
      x = work(steps, x);
      cross_ar();
    });
    check(node_sum, node_size);
    check(cross_sum, cross_size);
    double t_work = seconds_per_iteration(o.iters, [&] { x = work(steps, x); });
    double t_work2 = seconds_per_iteration(o.iters, [&] { x = work(2 * steps, x); });
    if (rank == 0)
      std::printf("compute_us=%lld node_ms=%.3f cross_ms=%.3f both_ms=%.3f work_ms=%.3f work2_ms=%.3f\n", us,
                  t_node * 1e3, t_cross * 1e3, t_both * 1e3, t_work * 1e3, t_work2 * 1e3);
  }
  if (rank == 0)
    std::printf("ranks_per_node=%d nodes=%d bytes=%lld iters=%d%s\n", node_size, cross_size, o.bytes, o.iters,
                x == 0 ? " x=0" : "");
  int all_ok = 0, my_ok = ok ? 1 : 0;
  MPI_Allreduce(&my_ok, &all_ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
  if (rank == 0 && !all_ok) std::fprintf(stderr, "interleave: wrong all-reduce result\n");
  MPI_Comm_free(&cross);
  MPI_Comm_free(&node);
  MPI_Finalize();
  return all_ok ? 0 : 1;
}
