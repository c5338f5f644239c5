// plain_allreduce: the independent loop measure's busbw is compared with
// (measure/README.md, busbw), nothing of measure in it.
//
//   mpirun -np 2 plain_allreduce [--warmup W] [--iters N] [--repeats R] [--untouched] 16M ...
//
// For each size: R timings, each of N back-to-back MPI_Allreduce calls (fp32,
// sum, in place: as measure and the engine issue them) after W untimed ones, bracketed by a barrier and
// MPI_Wtime, the slowest rank's time; busbw = bytes / time × 2(g−1)/g. Prints
// every timing, their median, and the page faults of the first repeat, its
// warm-up included (most on any rank): the process's first calls at the size.
// Buffers are malloc'd for the largest size and written once, unless
// --untouched.
#include <mpi.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

long minor_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

// "16M", "1K", "4096": powers of 1024.
size_t parse_size(const std::string& s) {
  size_t used = 0;
  double v = std::stod(s, &used);
  char u = used < s.size() ? s[used] : 'B';
  return size_t(v * (u == 'K' ? 1024.0 : u == 'M' ? 1048576.0 : u == 'G' ? 1073741824.0 : 1.0));
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int warmup = 5, iters = 20, repeats = 5;
  bool touch = true;
  std::vector<size_t> sizes;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--warmup" && i + 1 < argc) warmup = std::atoi(argv[++i]);
    else if (a == "--iters" && i + 1 < argc) iters = std::atoi(argv[++i]);
    else if (a == "--repeats" && i + 1 < argc) repeats = std::atoi(argv[++i]);
    else if (a == "--untouched") touch = false;
    else sizes.push_back(parse_size(a));
  }
  if (sizes.empty() || iters < 1 || repeats < 1 || warmup < 0) {
    if (rank == 0) std::fprintf(stderr, "usage: plain_allreduce [--warmup W] [--iters N] [--repeats R] [--untouched] SIZE...\n");
    MPI_Finalize();
    return 2;
  }
  size_t largest = *std::max_element(sizes.begin(), sizes.end());
  auto* buf = static_cast<float*>(std::malloc(largest));
  // Not zeros: the compiler turns malloc then memset(0) into calloc, which
  // leaves fresh pages unwritten, and the first collective would fault them.
  if (touch) std::fill(buf, buf + largest / sizeof(float), 1.0f);
  double factor = 2.0 * (size - 1) / size;
  for (size_t bytes : sizes) {
    int count = int(bytes / sizeof(float));
    std::vector<double> busbw;
    long first_faults = 0;
    for (int r = 0; r < repeats; ++r) {
      long f0 = minor_faults();
      for (int i = 0; i < warmup; ++i) MPI_Allreduce(MPI_IN_PLACE, buf, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      MPI_Barrier(MPI_COMM_WORLD);
      double t0 = MPI_Wtime();
      for (int i = 0; i < iters; ++i) MPI_Allreduce(MPI_IN_PLACE, buf, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      double mine = (MPI_Wtime() - t0) / iters, slowest = 0;
      if (r == 0) first_faults = minor_faults() - f0;
      MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      busbw.push_back(double(bytes) / slowest * factor / 1e9);
    }
    long most = 0;
    MPI_Reduce(&first_faults, &most, 1, MPI_LONG, MPI_MAX, 0, MPI_COMM_WORLD);
    std::vector<double> sorted = busbw;
    std::sort(sorted.begin(), sorted.end());
    if (rank == 0) {
      std::printf("%zu bytes, %d ranks: busbw median %.4f GB/s; each:", bytes, size, sorted[sorted.size() / 2]);
      for (double b : busbw) std::printf(" %.4f", b);
      std::printf("; page faults in the first: %ld\n", most);
    }
  }
  std::free(buf);
  MPI_Finalize();
  return 0;
}
