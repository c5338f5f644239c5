// engine: train a GPT on the 4D grid under MPI and record what happened.
#include <cblas.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "advisor/core/atomic_file.hpp"
#include "advisor/core/engine_args.hpp"
#include "advisor/core/error.hpp"
#include "advisor/core/job.hpp"
#include "engine/data.hpp"
#include "engine/record.hpp"
#include "engine/train.hpp"
#include "engine/version.hpp"

using namespace ff;
using namespace ff::engine;

using Cli = EngineArgs;

namespace {

// The best rate of a large GEMM with every rank running it at once: the
// ceiling the run's own GEMMs are held against (each GPU's own on the cuda
// device: 8192³, large enough to fill an H100).
template <typename T>
double blas_peak(int n) {
  std::vector<T> a(size_t(n) * n, T(0.5)), b(size_t(n) * n, T(0.25)), c(size_t(n) * n);
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    double t0 = now_s();
    blas_gemm(false, false, n, n, n, T(1), a.data(), n, b.data(), n, T(0), c.data(), n);
    double dt = now_s() - t0;
    best = std::max(best, 2.0 * n * n * double(n) / dt);
  }
  return best;
}

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

template <typename T>
int run(const Cli& cli, const RunOptions& opts, int ranks, int rank, const std::string& command) {
  // bf16 on the cpu is widened to fp32 for BLAS: the fp32 peak is its ceiling.
  double peak = !cli.bench                ? 0
                : cli.device == "cuda" ? cuda_gemm_peak(8192, cli.dtype)
                                       : blas_peak<master_t<T>>(1024);
  if (rank == 0 && !cli.quiet)
    std::printf("engine: %s on grid %s order %s, %d ranks, %ld micro-steps of %d sequences, %s (%s gradients)\n",
                opts.model.name.c_str(), opts.config.grid.str().c_str(), opts.config.order.str().c_str(), ranks,
                micro_steps_of(opts), opts.config.micro_batch, cli.dtype.c_str(), opts.grad_dtype.c_str());
  auto print_step = [&](const StepRecord& s) {
    if (cli.quiet) return;
    std::printf("step %4d  loss %.4f  time %8.2f ms\n", s.step, s.loss, s.time_s * 1e3);
    std::fflush(stdout);
  };
  if (rank == 0 && !cli.quiet && opts.config.shard_optimizer && opts.config.grid.d == 1)
    std::printf("note: --shard-optimizer with G_data = 1: nothing to shard over, the optimizer runs as without it\n");
  RunResult res = train<T>(MPI_COMM_WORLD, opts, false, print_step);
  if (rank != 0) return 0;

  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  char mpi[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(mpi, &len);
  std::string mpi_version(mpi, len);
  if (auto nl = mpi_version.find_first_of("\n,"); nl != std::string::npos) mpi_version.resize(nl);
  Provenance prov{host, mpi_version, openblas_get_config(), FOURFOLD_GIT_REVISION, command};
  nlohmann::json rec = run_record(opts, cli.dtype, ranks, res, prov);

  if (cli.bench) {
    // The first step warms caches and allocations: left out.
    double time = 0, gemm = 0, flops = 0, compute = 0;
    for (size_t i = res.steps.size() > 1 ? 1 : 0; i < res.steps.size(); ++i) {
      const StepRecord& s = res.steps[i];
      time += s.time_s, gemm += s.gemm_s, flops += s.gemm_flops, compute += s.compute_s;
    }
    size_t n = res.steps.size() > 1 ? res.steps.size() - 1 : res.steps.size();
    double tokens = double(opts.batch) * opts.model.seq_len * double(n);
    double rate = gemm > 0 ? flops / gemm : 0;
    rec["bench"] = {{"blas_peak_flops_per_rank", peak}, {"gemm_flops_per_s_per_rank", rate},
                    {"gemm_fraction_of_peak", peak > 0 ? rate / peak : 0}, {"gemm_share_of_step", gemm / time},
                    {"non_gemm_compute_share_of_step", (compute - gemm) / time},
                    {"communication_share_of_step", 1 - compute / time}, {"tokens_per_s", tokens / time},
                    {"gemm_flops_per_s_of_step_per_rank", flops / time},
                    {"steps_timed", n}, {"startup_s", res.startup_s}, {"startup_cpu_s", res.startup_cpu_s}};
    std::printf("\n%-34s %12s\n", "bench (steps after the first)", "value");
    std::printf("%-34s %12s\n", "tokens/s", fixed(tokens / time, 0).c_str());
    std::printf("%-34s %12s\n", "BLAS peak per rank (GFLOP/s)", fixed(peak / 1e9, 2).c_str());
    // A GPU's kernel times come from events, which only --profile-kernels records.
    const std::string untimed = "-";
    auto timed = [&](const std::string& v) { return res.kernels_timed ? v : untimed; };
    std::printf("%-34s %12s\n", "GEMM rate per rank (GFLOP/s)", timed(fixed(rate / 1e9, 2)).c_str());
    std::printf("%-34s %11s%%\n", "GEMM rate / BLAS peak", timed(fixed(100 * rate / peak, 1)).c_str());
    // The GEMMs' FLOPs over the whole step: a model-FLOPs utilisation that
    // counts the model's matrix products alone (attention's are in its kernels).
    std::printf("%-34s %11s%%\n", "GEMM FLOPs / step time / peak", fixed(100 * flops / time / peak, 1).c_str());
    std::printf("%-34s %11s%%\n", "step in GEMM", timed(fixed(100 * gemm / time, 1)).c_str());
    std::printf("%-34s %11s%%\n", "step in other compute", timed(fixed(100 * (compute - gemm) / time, 1)).c_str());
    std::printf("%-34s %11s%%\n", "step blocked in communication", fixed(100 * (1 - compute / time), 1).c_str());
    std::printf("%-34s %12s\n", "start-up before step 0 (s)", fixed(res.startup_s, 2).c_str());
    std::printf("%-34s %12s\n", "  of it CPU time (s)", fixed(res.startup_cpu_s, 2).c_str());
    if (res.kernels_timed) {
      std::printf("\n%-34s %12s %12s\n", "kernels per step, by class", "launches", "ms");
      for (int c = 0; c < kKernelClasses; ++c)
        if (res.class_launches[size_t(c)] > 0)
          std::printf("%-34s %12s %12s\n", kernel_class_name(KernelClass(c)), fixed(res.class_launches[size_t(c)], 0).c_str(),
                      fixed(res.class_s[size_t(c)] * 1e3, 2).c_str());
    }
  }
  if (!cli.quiet && !res.steps.empty()) {
    PerAxis<double> comm{};
    for (const StepRecord& s : res.steps)
      for (int a = 0; a < kAxisCount; ++a) comm[a] += s.comm_s[a] / double(res.steps.size());
    std::printf("blocked in communication per step (ms):");
    for (Axis a : kAxes) std::printf("%s%s %.2f", a == kAxes[0] ? " " : "  ", axis_name(a), comm[int(a)] * 1e3);
    if (res.inflight_s > 0)
      std::printf("; non-blocking in flight %.2f, of it exposed %.2f", res.inflight_s * 1e3,
                  res.nonblocking_exposed_s * 1e3);
    std::printf("\n");
  }
  if (opts.config.offload && !cli.quiet)
    std::printf("offload: %ld buckets of %ld elements in %ld all-reduce chunks; host link %.2f ms per step, %.2f ms "
                "of it under the chunks in flight%s; %.1f MB each way\n",
                res.offload.buckets, long(opts.buckets.offload_elements), res.dp_buckets, res.offload.copy_s * 1e3,
                res.offload.hidden_s * 1e3, opts.opt.clip > 0 ? " (clipping waits for every chunk: --clip 0 to overlap)" : "",
                res.offload.copy_bytes / 1e6);
  if (res.device == "paced" && !cli.quiet) {
    const nlohmann::json& pd = rec["device"];
    std::printf("paced device (%s): busy %.2f ms per step; host work %.0f%% of it (worst rank), late %.2f ms\n",
                pace_label(opts.pace).c_str(), pd["busy_s_per_step"].get<double>() * 1e3,
                100 * pd["host_share_of_busy_max"].get<double>(), pd["late_s_per_step_max"].get<double>() * 1e3);
  }
  if (rec["device"].contains("warning"))
    std::fprintf(stderr, "engine: warning: %s\n", rec["device"]["warning"].get<std::string>().c_str());
  if (!cli.record.empty()) write_file_atomic(cli.record, rec.dump(2) + "\n");
  if (!cli.trace_comm.empty()) write_file_atomic(cli.trace_comm, comm_trace_json(res.comm_trace).dump() + "\n");
  if (!cli.quiet && !res.steps.empty())
    std::printf("final loss %.4f%s\n", res.steps.back().loss,
                cli.record.empty() ? "" : ("; record: " + cli.record).c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_CHECK(MPI_Init(&argc, &argv));
  int rank = 0, ranks = 1;
  MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &ranks));
  // Errors come back to MPI_CHECK, which names the call site before aborting
  // (communicators split from the world inherit this).
  MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));

  Cli cli;
  CLI::App app{"engine: train a GPT on a grid of MPI ranks (G_x, G_y, G_z, stages P, G_data) and record what happened.\n"
               "Launch with one rank per grid cell, e.g. mpirun -np 8 --map-by ppr:8:node engine --grid 2,2,1,2 ..."};
  add_engine_options(app, cli);

  int code = 0;
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (rank == 0) code = app.exit(e);
    else code = e.get_exit_code();
    if (code != 0) code = 2;
    MPI_Finalize();
    return code;
  }

  std::ostringstream command;
  for (int i = 0; i < argc; ++i) command << (i ? " " : "") << argv[i];
  RunOptions opts;
  std::string error;
  try {
    opts.model = load_model(cli.model, nullptr, cli.seq_len);
    if (std::string why = engine_model_problem(opts.model); !why.empty())
      input_error("--model " + cli.model + ": " + why + " (the advisor prices it; the engine cannot run it)");
    opts.config = config_of(cli);
    opts.grad_dtype = engine_grad_dtype(cli);
    const Config& c = opts.config;
    if (std::string why = stage_layers_problem(opts.model, c.grid.p, cli.stage_layers); !why.empty())
      input_error("--stage-layers: " + why);
    opts.stage_layers = cli.stage_layers;
    opts.buckets.offload_elements = size_t(cli.offload_bucket);
    opts.buckets.offload_chunk = cli.offload_chunk;
    opts.buckets.dp_bytes = cli.dp_bucket_mib * 1048576.0;
    opts.opt.clip = cli.clip;
    opts.device = cli.device;
    opts.pace = pace_of(cli);
    if (c.grid.total() != ranks)
      input_error("--grid " + c.grid.label() + " has " + std::to_string(c.grid.total()) + " cells but " +
                  std::to_string(ranks) + " ranks were launched");
    opts.batch = cli.batch ? cli.batch : long(c.micro_batch) * c.grid.z * c.grid.d;
    opts.steps = cli.steps;
    opts.data = cli.data;
    opts.seed = cli.seed;
    opts.opt.lr = cli.lr;
    opts.trace_comm = !cli.trace_comm.empty();
    opts.profile_kernels = cli.profile_kernels;
    micro_steps_of(opts);
    engine::check_divisible(opts.model, c.grid);
    TokenSource probe(opts.data, opts.model.vocab, opts.model.seq_len, opts.seed);
  } catch (const InputError& e) {
    error = e.what();
  }
  // Ranks usually fail alike; the lowest failing rank speaks for all.
  int first_bad = error.empty() ? ranks : rank;
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &first_bad, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
  if (first_bad < ranks) {
    if (rank == first_bad)
      std::fprintf(stderr, "engine: error%s: %s\n", rank ? (" on rank " + std::to_string(rank)).c_str() : "",
                   error.c_str());
    MPI_Finalize();
    return 2;
  }
  // Every rank takes its GPU (a collective, so only once the flags are
  // known good everywhere); the lowest rank without one speaks.
  if (cli.device == "cuda") {
    std::string why;
    first_bad = select_cuda_gpu(MPI_COMM_WORLD, &why) ? ranks : rank;
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &first_bad, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    if (first_bad < ranks) {
      if (rank == first_bad)
        std::fprintf(stderr, "engine: error%s: --device cuda: %s\n",
                     rank ? (" on rank " + std::to_string(rank)).c_str() : "", why.c_str());
      MPI_Finalize();
      return 2;
    }
  }

  try {
    code = cli.dtype == "fp64"   ? run<double>(cli, opts, ranks, rank, command.str())
           : cli.dtype == "bf16" ? run<bf16>(cli, opts, ranks, rank, command.str())
                                 : run<float>(cli, opts, ranks, rank, command.str());
  } catch (const InputError& e) {
    // Raised on every rank at once (a NaN loss is seen by all), or on rank 0
    // alone when the record cannot be written, after the last collective.
    if (rank == 0) std::fprintf(stderr, "engine: error: %s\n", e.what());
    code = 2;
  }
  MPI_Finalize();
  return code;
}
