// The cuda device against the cpu device (DESIGN §11): the schedule's glue
// kernels through DeviceKernels on the same inputs, and three full training
// steps of a small model from the same counter-based initialisation — fp64:
// every step's loss and every parameter to 1e-10; fp32 (TF32 off): the loss
// to 1e-5. One rank (one GPU). Exits 77 (skipped) where no GPU is usable, as
// the other GPU tests do.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "cuda_device.hpp"
#include "gpt.hpp"
#include "train.hpp"

using namespace ff;
using namespace ff::engine;

namespace {

template <typename T>
Buffer<T> uniform(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> d(-1, 1);
  Buffer<T> v(n);
  for (T& x : v) x = T(d(rng));
  return v;
}

// max |a − b| over max |b|.
template <class V>
double rel_diff(const V& a, const V& b) {
  REQUIRE(a.size() == b.size());
  double diff = 0, scale = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    diff = std::max(diff, std::abs(a[i] - b[i]));
    scale = std::max(scale, std::abs(b[i]));
  }
  return diff / std::max(scale, 1e-300);
}

ModelSpec small_model() {
  ModelSpec m;
  m.name = "gpt-check";
  m.layers = 2, m.hidden = 64, m.heads = 4, m.ffn = 256, m.vocab = 250, m.padded_vocab = 256, m.seq_len = 32;
  return m;
}

RunOptions options(const std::string& device, int micro_batch, bool recompute) {
  RunOptions o;
  o.model = small_model();
  o.config.micro_batch = micro_batch;
  o.config.recompute = recompute;
  o.batch = 4;
  o.steps = 3;
  o.opt.lr = 1e-2;  // parameters move visibly in 3 steps
  o.device = device;
  return o;
}

}  // namespace

TEST_CASE("the glue kernels: cuda against cpu, fp64") {
  CudaDevice gpu;
  auto cpu_dev = make_cpu_device();
  auto on_gpu = make_cuda_kernels<double>(gpu);
  CpuKernels<double> on_cpu(*cpu_dev);
  const long rows = 37, n = 53;
  const Buffer<double> a = uniform<double>(size_t(rows * n), 1), b = uniform<double>(size_t(rows * n), 2);
  const Buffer<double> bias = uniform<double>(size_t(n), 3);
  auto both = [&](auto&& run) {  // the same call on each device's copy of the output
    Buffer<double> x = uniform<double>(size_t(rows * n), 4), y = x;
    run(on_cpu, x);
    run(*on_gpu, y);
    gpu.synchronize();
    return rel_diff(y, x);
  };
  using K = DeviceKernels<double>;
  using Out = Buffer<double>;
  CHECK(both([&](K& k, Out& out) { k.add(a.data(), b.data(), out.data(), out.size()); }) <= 1e-15);
  CHECK(both([&](K& k, Out& out) { k.add(out.data(), b.data(), out.data(), out.size()); }) <= 1e-15);
  CHECK(both([&](K& k, Out& out) { k.add_bias(out.data(), bias.data(), rows, n); }) <= 1e-15);
  CHECK(both([&](K& k, Out& out) { k.bias_grad(a.data(), out.data(), rows, n); }) <= 1e-13);
  CHECK(both([&](K& k, Out& out) { k.copy(a.data(), out.data() + 5, 100); }) == 0);
  CHECK(both([&](K& k, Out& out) { k.zero(out.data() + 7, 300); }) == 0);
  const double sq_cpu = on_cpu.sum_of_squares(a.data(), a.size()), sq_gpu = on_gpu->sum_of_squares(a.data(), a.size());
  CHECK(std::abs(sq_gpu - sq_cpu) <= 1e-12 * sq_cpu);
  CHECK(sq_cpu > 0);

  // Tokens copied to the device, then the targets: the token after each input.
  const long S = 5, seqs = 3;
  std::vector<int> tokens(size_t(seqs * (S + 1)));
  std::iota(tokens.begin(), tokens.end(), 100);
  Buffer<int> t_cpu(size_t(seqs * S)), t_gpu(size_t(seqs * S));
  on_cpu.targets(on_cpu.tokens(tokens.data(), tokens.size(), 0), t_cpu.data(), seqs * S, S);
  on_gpu->targets(on_gpu->tokens(tokens.data(), tokens.size(), 0), t_gpu.data(), seqs * S, S);
  gpu.synchronize();
  for (long i = 0; i < seqs * S; ++i) {
    CHECK(t_gpu[size_t(i)] == t_cpu[size_t(i)]);
    CHECK(t_cpu[size_t(i)] == 100 + (i / S) * (S + 1) + i % S + 1);  // by hand
  }
}

TEST_CASE("three training steps: cuda against cpu, fp64 to 1e-10") {
  for (auto [mb, recompute] : {std::pair{1, false}, std::pair{2, true}}) {
    INFO("micro-batch " << mb << (recompute ? ", recompute" : ""));
    const RunResult cpu = train<double>(MPI_COMM_WORLD, options("cpu", mb, recompute), true);
    const RunResult gpu = train<double>(MPI_COMM_WORLD, options("cuda", mb, recompute), true);
    CHECK(gpu.device == "cuda");
    REQUIRE(gpu.steps.size() == cpu.steps.size());
    for (size_t s = 0; s < cpu.steps.size(); ++s)
      CHECK(std::abs(gpu.steps[s].loss - cpu.steps[s].loss) <= 1e-10 * std::abs(cpu.steps[s].loss));
    REQUIRE(gpu.parameters.size() == cpu.parameters.size());
    for (size_t i = 0; i < cpu.parameters.size(); ++i) {
      INFO(cpu.parameters[i].first);
      CHECK(rel_diff(gpu.parameters[i].second, cpu.parameters[i].second) <= 1e-10);
    }
    CHECK(gpu.steps.back().gemm_s > 0);  // from the device's events
    REQUIRE(gpu.device_peak_bytes.size() == 1);
    CHECK(gpu.device_peak_bytes[0] > 0);
  }
}

TEST_CASE("three training steps: cuda against cpu, fp32 loss to 1e-5") {
  const RunResult cpu = train<float>(MPI_COMM_WORLD, options("cpu", 2, false), false);
  const RunResult gpu = train<float>(MPI_COMM_WORLD, options("cuda", 2, false), false);
  for (size_t s = 0; s < cpu.steps.size(); ++s)
    CHECK(std::abs(gpu.steps[s].loss - cpu.steps[s].loss) <= 1e-5 * std::abs(cpu.steps[s].loss));
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != 1) {
    std::fprintf(stderr, "MPI_Comm_size is %d; this test runs on one rank (one GPU)\n", size);
    MPI_Finalize();
    return 1;
  }
  std::string why;
  if (!select_cuda_gpu(MPI_COMM_WORLD, &why)) {
    std::printf("skipped: %s\n", why.c_str());
    MPI_Finalize();
    return 77;
  }
  doctest::Context context(argc, argv);
  const int failed = context.run();
  MPI_Finalize();
  return failed;
}
