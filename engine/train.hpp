#pragma once
// A training run on one communicator: the step loop, its timing, and what
// the run record reports. Used by the engine CLI and, on sub-communicators
// of one launch, by the exactness tests.
#include <mpi.h>

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "advisor/core/config.hpp"
#include "advisor/core/model_spec.hpp"
#include "engine/gpt.hpp"
#include "engine/runtime/check.hpp"  // MPI_CHECK, for train()'s callers too

namespace ff::engine {

struct RunOptions {
  ModelSpec model;
  Config config;      // dtype is ignored here: the scalar is the template argument
  // fp32, or the training dtype (bf16; fp64 in fp64): engine_grad_dtype's.
  std::string grad_dtype = "fp32";
  std::vector<int> stage_layers;  // each stage's blocks, pinned; empty: the advisor's partition (MODEL.md §9)
  long batch = 0;     // sequences per step
  int steps = 1;
  AdamW opt;
  std::string data = "synthetic";
  uint64_t seed = kDefaultSeed;
  std::string device = "cpu";  // "cpu", "paced" or "cuda" (device.hpp)
  DevicePace pace;             // the paced device's
  BucketSizes buckets;         // ODP's gradient buckets, offload's buckets and chunks
  bool trace_comm = false;     // every rank's communication events, to RunResult::comm_trace
  bool profile_kernels = false;  // cuda: every kernel timed (CudaDevice)
};

struct StepRecord {
  int step = 0;
  double loss = 0;
  double grad_norm = 0;
  double time_s = 0;                 // slowest rank
  double compute_s = 0;              // mean over ranks: time not blocked in communication
  PerAxis<double> comm_s{};          // mean over ranks: blocked in that axis' calls and waits
  double sync_s = 0;                 // mean over ranks: loss and gradient-norm scalars
  double gemm_s = 0;                 // mean over ranks
  double gemm_flops = 0;             // per rank
  double device_s = 0;               // mean over ranks: the device's busy time (paced: by construction)
  double late_s = 0;                 // the latest rank: how far its host's real work pushed the device clock
};

// A pipeline stage over the steps after the first, per step, mean over its ranks.
struct StageRecord {
  double busy_s = 0;       // the device computing (its kernels' time)
  double idle_s = 0;       // the host waiting for a neighbour's message (or a send to drain)
  PerAxis<double> bytes{}; // per axis, as bytes_per_step (on P: the messages it sends)
};

struct RunResult {
  std::vector<StageRecord> stages;         // P > 1, on world rank 0
  std::vector<StepRecord> steps;
  PerAxis<double> bytes_per_step{};        // per axis, per rank
  std::vector<double> peak_memory_bytes;   // per rank (resident set), on world rank 0
  // Per rank, on world rank 0, per step after the first (the paced device's
  // check that the host kept up): device busy, the host's real work in
  // kernels, and how late the host was against the device clock.
  std::vector<double> device_busy_s, host_work_s, late_s;
  std::vector<double> device_peak_bytes;  // cuda, per rank on world rank 0: the engine's arrays on the GPU
  std::string device;
  std::string attention;                   // "flash" or "unfused": what ran (Gpt::flash)
  // Per kernel class, per step after the first, mean over ranks: the GPU
  // kernels launched and, where timed (kernels_timed), their device time.
  std::array<double, kKernelClasses> class_launches{}, class_s{};
  bool kernels_timed = false;
  double inflight_s = 0;                   // non-blocking collectives, post to completion, mean per rank per step
  double nonblocking_exposed_s = 0;        // of that, spent inside MPI
  long micro_steps = 0;
  long dp_buckets = 0;                     // the shard arena's data-parallel reduction, in this many pieces
  // Offload, per step after the first, mean over ranks: the host link's
  // copies (both directions), the part hidden under the all-reduce chunks,
  // the bytes each way, and the optimizer buckets.
  OffloadStats offload;
  double startup_s = 0;                    // train() entered → step 0: communicators, parameters, buffers (slowest rank)
  double startup_cpu_s = 0;                // the CPU time of that interval (slowest rank): what it costs on a busy machine
  std::vector<std::pair<std::string, std::vector<double>>> parameters;  // canonical, on rank 0, if asked
  std::vector<std::vector<CommEvent>> comm_trace;  // per world rank, on world rank 0, if asked
};

// Every rank's check that (batch, micro_batch, grid) make whole micro-steps;
// throws InputError.
long micro_steps_of(const RunOptions& o);

// Trains on `world` (size = grid product). `on_step` runs on world rank 0
// after each step. Throws InputError on a NaN/inf loss (every rank sees it).
template <typename T>
RunResult train(MPI_Comm world, const RunOptions& o, bool want_parameters,
                const std::function<void(const StepRecord&)>& on_step = {});

}  // namespace ff::engine
