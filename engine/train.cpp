#include "engine/train.hpp"

#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <type_traits>

#include "advisor/core/error.hpp"
#include "advisor/core/job.hpp"
#include "engine/data.hpp"
#include "engine/mpi_comm.hpp"
#include "engine/pipeline.hpp"
#include "engine/runtime/mpi_poll.hpp"
#ifdef FF_CUDA_DEVICE
#include "engine/cuda/cuda_device.hpp"
#include "engine/cuda/nccl_comm.hpp"
#endif

namespace ff::engine {

long micro_steps_of(const RunOptions& o) {
  const Grid& g = o.config.grid;
  long per = long(o.config.micro_batch) * g.z * g.d;
  if (o.batch <= 0 || o.config.micro_batch <= 0) input_error("--batch and --micro-batch must be positive");
  if (o.batch % per != 0)
    input_error("--batch " + std::to_string(o.batch) + " is not a multiple of micro_batch·G_z·G_data = " +
                std::to_string(per));
  const long M = o.batch / per;
  if (o.config.sequence_parallel)
    if (std::string why = sequence_parallel_problem(o.model, g, o.config.micro_batch); !why.empty())
      input_error("--sequence-parallel: " + why);
  if (const int v = o.config.virtual_stages; v > 1) {
    Job job;
    job.model = o.model;
    job.batch = o.batch;
    job.stage_layers = o.stage_layers;
    if (std::string why = virtual_stages_problem(job, g, o.config.micro_batch, v); !why.empty()) input_error(why);
    // Stage messages are tagged by (direction, chunk, micro-batch), under
    // the tied embeddings' exchange's tag.
    if (2L * v * M > 32767)
      input_error("--virtual-stages " + std::to_string(v) + ": " + std::to_string(M) +
                  " micro-batches per pipeline need more stage-message tags than MPI promises (2·v·M <= 32767): "
                  "lower --batch");
  }
  return M;
}

namespace {

// NCCL on the cuda device, MPI elsewhere.
std::unique_ptr<Comm> make_comm(MPI_Comm world, const Config& c, Device& device, double poll_s) {
#ifdef FF_CUDA_DEVICE
  if (auto* gpu = dynamic_cast<CudaDevice*>(&device)) return std::make_unique<NcclComm>(world, c.grid, c.order, *gpu);
#endif
  return std::make_unique<MpiComm>(world, c.grid, c.order, device, poll_s);
}

// This process's CPU time, user and system, every thread.
double cpu_s() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

double peak_rss_bytes() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_maxrss) * 1024.0;  // Linux reports KiB
}

// Every rank's communication events on world rank 0, after the run.
std::vector<std::vector<CommEvent>> gather_events(MPI_Comm world, const std::vector<CommEvent>& mine) {
  constexpr int k = 7;
  int ranks = 0;
  MPI_CHECK(MPI_Comm_size(world, &ranks));
  const bool root = rank_in(world) == 0;
  std::vector<double> flat;
  flat.reserve(mine.size() * k);
  for (const CommEvent& e : mine)
    flat.insert(flat.end(), {double(e.step), double(int(e.axis)), double(int(e.kind)), e.bytes, e.ready_s, e.start_s,
                             e.end_s});
  int n = int(flat.size());
  std::vector<int> counts(root ? size_t(ranks) : 0), displs(counts.size());
  MPI_CHECK(MPI_Gather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, world));
  for (size_t r = 1; r < counts.size(); ++r) displs[r] = displs[r - 1] + counts[r - 1];
  std::vector<double> all(root ? size_t(displs.back() + counts.back()) : 0);
  MPI_CHECK(MPI_Gatherv(flat.data(), n, MPI_DOUBLE, all.data(), counts.data(), displs.data(), MPI_DOUBLE, 0, world));
  std::vector<std::vector<CommEvent>> out(counts.size());
  for (size_t r = 0; r < counts.size(); ++r)
    for (int i = displs[r]; i < displs[r] + counts[r]; i += k) {
      const double* v = &all[size_t(i)];
      out[r].push_back({int(v[0]), Axis(int(v[1])), CommEvent::Kind(int(v[2])), v[3], v[4], v[5], v[6]});
    }
  return out;
}

// Per-step values of every rank, reduced after the run so that no step
// carries reporting traffic: time as the slowest rank, the rest as means.
void reduce_steps(MPI_Comm world, std::vector<StepRecord>& steps) {
  int ranks = 0;
  MPI_CHECK(MPI_Comm_size(world, &ranks));
  // Per step: compute, each axis' communication, sync, GEMM, device (means);
  // time and lateness (maxima).
  const int k = 4 + kAxisCount;
  std::vector<double> sum(steps.size() * k), mx(2 * steps.size());
  for (size_t s = 0; s < steps.size(); ++s) {
    const StepRecord& r = steps[s];
    double* v = &sum[s * k];
    v[0] = r.compute_s;
    for (int a = 0; a < kAxisCount; ++a) v[1 + a] = r.comm_s[a];
    v[1 + kAxisCount] = r.sync_s;
    v[2 + kAxisCount] = r.gemm_s;
    v[3 + kAxisCount] = r.device_s;
    mx[2 * s] = r.time_s;
    mx[2 * s + 1] = r.late_s;
  }
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, sum.data(), int(sum.size()), MPI_DOUBLE, MPI_SUM, world));
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, mx.data(), int(mx.size()), MPI_DOUBLE, MPI_MAX, world));
  for (size_t s = 0; s < steps.size(); ++s) {
    StepRecord& r = steps[s];
    const double* v = &sum[s * k];
    r.compute_s = v[0] / ranks;
    for (int a = 0; a < kAxisCount; ++a) r.comm_s[a] = v[1 + a] / ranks;
    r.sync_s = v[1 + kAxisCount] / ranks;
    r.gemm_s = v[2 + kAxisCount] / ranks;
    r.device_s = v[3 + kAxisCount] / ranks;
    r.time_s = mx[2 * s];
    r.late_s = mx[2 * s + 1];
  }
}

}  // namespace

template <typename T>
RunResult train(MPI_Comm world, const RunOptions& o, bool want_parameters,
                const std::function<void(const StepRecord&)>& on_step) {
  const double entered = now_s(), entered_cpu = cpu_s();
  const Config& c = o.config;
  const long micro_steps = micro_steps_of(o);
  const long S = o.model.seq_len, mb = c.micro_batch;
  TokenSource data(o.data, o.model.vocab, int(S), o.seed);

  int ranks = 0;
  MPI_CHECK(MPI_Comm_size(world, &ranks));
  const bool paced = o.device == "paced";
  std::unique_ptr<Device> device = paced                  ? make_paced_device(o.pace, std::is_same_v<T, double>)
                                   : o.device == "cuda" ? make_cuda_device(o.profile_kernels)
                                                        : make_cpu_device();
  if (paced) set_fine_timer_slack();
  const int world_rank = rank_in(world);
  const std::unique_ptr<Comm> comm_owner = make_comm(world, c, *device, paced ? o.pace.poll_s : 0.0);
  Comm& comm = *comm_owner;
  comm.tracing = o.trace_comm;
  // The loss is replicated over X and Y: one rank of each (z, d) of the last
  // stage reports it.
  const int P = c.grid.p, stage = comm.coord(Axis::P), v = c.virtual_stages;
  const size_t slots = v > 1 ? interleaved_slots(P, stage, v, micro_steps) : 0;
  // Gradients in the training dtype where it is not the accumulators' own (bf16).
  const bool grads_in_t = !std::is_same_v<T, master_t<T>> && o.grad_dtype != "fp32";
  Gpt<T> model(comm, o.model, c, o.seed, o.buckets, o.stage_layers, slots, grads_in_t);
  const int z = comm.coord(Axis::Z), d = comm.coord(Axis::D);
  const bool reports_loss = comm.coord(Axis::X) == 0 && comm.coord(Axis::Y) == 0 && stage == P - 1;
  std::unique_ptr<PipelineStage<T>> pipeline;
  if (P > 1) pipeline = std::make_unique<PipelineStage<T>>(model, comm, micro_steps, size_t(mb) * (S + 1), v);
  double stage_idle = 0;
  const master_t<T> grad_scale = master_t<T>(1.0 / (double(o.batch) * double(S)));
  std::vector<int> tokens(size_t(mb) * (S + 1));

  RunResult res;
  res.device = device->name();
  res.attention = model.flash() ? "flash" : "unfused";
  res.micro_steps = micro_steps;
  res.dp_buckets = long(model.dp_buckets());
  DeviceStats after_first{};
  OffloadStats offload_after_first{};
  device->place_arrays();
  res.startup_s = now_s() - entered;
  res.startup_cpu_s = cpu_s() - entered_cpu;
  for (int step = 0; step < o.steps; ++step) {
    comm.barrier();  // steps start together; the barrier is outside the timing
    comm.trace_step = step;
    const CommStats before = comm.stats;
    const DeviceStats device_before = device->stats;
    const GemmStats gemm_before = model.gemm_stats;
    const double t0 = now_s();

    model.zero_grad();
    // Sequences of a step go to (z, d) ranks in blocks of micro_batch.
    auto tokens_of = [&](long a, int* out) {
      long first = long(step) * o.batch + a * mb * c.grid.z * c.grid.d + (long(d) * c.grid.z + z) * mb;
      for (long i = 0; i < mb; ++i) data.sequence(first + i, &out[i * (S + 1)]);
    };
    double local_loss = 0;
    if (pipeline) {
      local_loss = pipeline->step(tokens_of, grad_scale);
    } else {
      for (long a = 0; a < micro_steps; ++a) {
        tokens_of(a, tokens.data());
        local_loss += model.micro_step(tokens.data(), grad_scale, a + 1 == micro_steps);
      }
    }
    StepRecord r;
    r.step = step;
    r.grad_norm = model.optimizer_step(o.opt);
    r.loss = comm.sum_all(reports_loss ? local_loss : 0.0) / (double(o.batch) * double(S));
    r.time_s = now_s() - t0;

    double blocked = 0;
    for (int a = 0; a < kAxisCount; ++a) {
      r.comm_s[a] = comm.stats.blocked_s[a] - before.blocked_s[a];
      blocked += r.comm_s[a];
      res.bytes_per_step[a] = comm.stats.bytes[a] - before.bytes[a];
    }
    r.sync_s = comm.stats.sync_s - before.sync_s;
    r.compute_s = r.time_s - blocked - r.sync_s;
    // A GPU's GEMM time is its events' (the launch returns before the GEMM ran).
    r.gemm_s = device->deferred() ? device->stats.gemm_s - device_before.gemm_s
                                  : model.gemm_stats.seconds - gemm_before.seconds;
    r.gemm_flops = model.gemm_stats.flops - gemm_before.flops;
    r.device_s = device->stats.busy_s - device_before.busy_s;
    if (step > 0 || o.steps == 1) {
      stage_idle += r.comm_s[int(Axis::P)];
    }
    r.late_s = device->stats.late_s - device_before.late_s;
    if (step == 0) after_first = device->stats, offload_after_first = model.offload_stats;
    res.steps.push_back(r);
    if (!std::isfinite(r.loss))
      input_error(std::string("loss is ") + (std::isnan(r.loss) ? "nan" : "inf") + " at step " +
                  std::to_string(step) + " (training diverged: lower --lr)");
    if (on_step && world_rank == 0) on_step(r);
  }
  reduce_steps(world, res.steps);
  double nb[2] = {comm.stats.inflight_s, comm.stats.nonblocking_exposed_s};
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, nb, 2, MPI_DOUBLE, MPI_SUM, world));
  double startup[2] = {res.startup_s, res.startup_cpu_s};
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, startup, 2, MPI_DOUBLE, MPI_MAX, world));
  res.startup_s = startup[0], res.startup_cpu_s = startup[1];
  const double per = double(ranks) * std::max(1, o.steps);
  res.inflight_s = nb[0] / per;
  res.nonblocking_exposed_s = nb[1] / per;

  // Per rank, per timed step (the first warms up).
  const double timed = std::max(1, o.steps - 1);
  const DeviceStats& ds = device->stats;
  const DeviceStats& from = o.steps > 1 ? after_first : DeviceStats{};
  for (auto [sum, mine] : {std::pair{&res.device_busy_s, ds.busy_s - from.busy_s},
                           std::pair{&res.host_work_s, ds.host_s - from.host_s},
                           std::pair{&res.late_s, ds.late_s - from.late_s}}) {
    double v = mine / timed;
    sum->assign(world_rank == 0 ? size_t(ranks) : 0, 0.0);
    MPI_CHECK(MPI_Gather(&v, 1, MPI_DOUBLE, sum->data(), 1, MPI_DOUBLE, 0, world));
  }

  res.kernels_timed = !device->deferred() || o.profile_kernels;
  for (size_t c = 0; c < size_t(kKernelClasses); ++c) {
    res.class_launches[c] = (ds.class_launches[c] - from.class_launches[c]) / timed;
    res.class_s[c] = (ds.class_s[c] - from.class_s[c]) / timed;
  }
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, res.class_launches.data(), kKernelClasses, MPI_DOUBLE, MPI_SUM, world));
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, res.class_s.data(), kKernelClasses, MPI_DOUBLE, MPI_SUM, world));
  for (size_t c = 0; c < size_t(kKernelClasses); ++c) res.class_launches[c] /= ranks, res.class_s[c] /= ranks;

  if (device->deferred()) {
    res.device_peak_bytes.assign(world_rank == 0 ? size_t(ranks) : 0, 0.0);
    MPI_CHECK(MPI_Gather(&ds.peak_bytes, 1, MPI_DOUBLE, res.device_peak_bytes.data(), 1, MPI_DOUBLE, 0, world));
  }

  if (c.offload) {
    const OffloadStats& os = model.offload_stats;
    const OffloadStats& of = o.steps > 1 ? offload_after_first : OffloadStats{};
    double v[4] = {os.copy_s - of.copy_s, os.hidden_s - of.hidden_s, os.copy_bytes - of.copy_bytes,
                   double(os.buckets - of.buckets)};
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, v, 4, MPI_DOUBLE, MPI_SUM, world));
    const double each = double(ranks) * timed;
    res.offload = {v[0] / each, v[1] / each, v[2] / each, long(std::lround(v[3] / each))};
  }

  if (P > 1) {  // per stage: this rank's figures, averaged over the stage's ranks on rank 0
    constexpr int k = 3 + kAxisCount;
    double mine[k] = {double(stage), (ds.busy_s - from.busy_s) / timed, stage_idle / timed};
    for (int a = 0; a < kAxisCount; ++a) mine[3 + a] = res.bytes_per_step[a];
    std::vector<double> all(world_rank == 0 ? size_t(k * ranks) : 0);
    MPI_CHECK(MPI_Gather(mine, k, MPI_DOUBLE, all.data(), k, MPI_DOUBLE, 0, world));
    if (world_rank == 0) {
      res.stages.assign(size_t(P), StageRecord{});
      const double per_stage = double(ranks / P);
      for (int r = 0; r < ranks; ++r) {
        const double* v = &all[size_t(k * r)];
        StageRecord& st = res.stages[size_t(v[0])];
        st.busy_s += v[1] / per_stage;
        st.idle_s += v[2] / per_stage;
        for (int a = 0; a < kAxisCount; ++a) st.bytes[a] += v[3 + a] / per_stage;
      }
    }
  }

  double rss = peak_rss_bytes();
  res.peak_memory_bytes.assign(world_rank == 0 ? size_t(ranks) : 0, 0.0);
  MPI_CHECK(MPI_Gather(&rss, 1, MPI_DOUBLE, res.peak_memory_bytes.data(), 1, MPI_DOUBLE, 0, world));
  if (want_parameters) res.parameters = model.canonical_parameters();
  if (o.trace_comm) res.comm_trace = gather_events(world, comm.events);
  return res;
}

template RunResult train<float>(MPI_Comm, const RunOptions&, bool, const std::function<void(const StepRecord&)>&);
template RunResult train<double>(MPI_Comm, const RunOptions&, bool, const std::function<void(const StepRecord&)>&);
template RunResult train<bf16>(MPI_Comm, const RunOptions&, bool, const std::function<void(const StepRecord&)>&);

}  // namespace ff::engine
