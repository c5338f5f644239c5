#include "engine/record.hpp"

#include "advisor/core/measurement.hpp"  // median
#include "advisor/model/memory_json.hpp"
#include "advisor/model/memory_model.hpp"

#include <algorithm>
#include <cstdio>

namespace ff::engine {

namespace {

double max_of(const std::vector<double>& v) { return v.empty() ? 0.0 : *std::max_element(v.begin(), v.end()); }

// The device, and for the paced one whether the host kept up with its clock:
// per rank, device busy time, the host's real work in kernels and how late
// the host made the device (all per step after the first). A run whose host
// was late by more than 5% of a step measured the host, not the pace.
nlohmann::json device_json(const RunOptions& o, const RunResult& r) {
  nlohmann::json d = {{"name", r.device}};
  if (r.device == "cuda") {
    d["busy_s_per_rank"] = r.device_busy_s;
    d["array_bytes_peak_per_rank"] = r.device_peak_bytes;
  }
  if (r.device != "paced") return d;
  const DevicePace& p = o.pace;
  d["pace"] = {{"gemm_gflops", p.gemm_flops / 1e9}, {"gbps", p.bytes_per_s / 1e9}, {"poll_us", p.poll_s * 1e6},
               {"host_gbps", p.host_bytes_per_s / 1e9}};
  d["busy_s_per_rank"] = r.device_busy_s;
  d["host_work_s_per_rank"] = r.host_work_s;
  d["late_s_per_rank"] = r.late_s;
  double busy = 0, share = 0;
  for (size_t i = 0; i < r.device_busy_s.size(); ++i) {
    busy += r.device_busy_s[i] / double(r.device_busy_s.size());
    if (r.device_busy_s[i] > 0) share = std::max(share, r.host_work_s[i] / r.device_busy_s[i]);
  }
  std::vector<double> times;
  for (size_t i = r.steps.size() > 1 ? 1 : 0; i < r.steps.size(); ++i) times.push_back(r.steps[i].time_s);
  const double step = times.empty() ? 0 : median(times), late = max_of(r.late_s);
  d["busy_s_per_step"] = busy;
  d["host_share_of_busy_max"] = share;
  d["late_s_per_step_max"] = late;
  d["late_share_of_step_max"] = step > 0 ? late / step : 0;
  if (step > 0 && late > 0.05 * step) {
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "the host was late against the paced device clock by %.1f%% of a step (worst rank): this run "
                  "measured the host's speed, not the pace; use a slower pace (--pace-gflops, --pace-gbps)",
                  100 * late / step);
    d["warning"] = buf;
  }
  return d;
}

// Per kernel class that launched, per step after the first, mean over ranks:
// launches, and seconds where the device timed them.
nlohmann::json kernels_json(const RunResult& r) {
  nlohmann::json classes = nlohmann::json::object();
  for (int c = 0; c < kKernelClasses; ++c) {
    if (r.class_launches[size_t(c)] == 0) continue;
    nlohmann::json k = {{"launches", r.class_launches[size_t(c)]}};
    if (r.kernels_timed) k["seconds"] = r.class_s[size_t(c)];
    classes[kernel_class_name(KernelClass(c))] = k;
  }
  return {{"timed", r.kernels_timed}, {"per_step", classes}};
}

// Per pipeline stage, per step after the first, mean over the stage's ranks.
nlohmann::json stages_json(const RunResult& r) {
  nlohmann::json out = nlohmann::json::array();
  for (size_t s = 0; s < r.stages.size(); ++s)
    out.push_back({{"stage", s}, {"busy_s", r.stages[s].busy_s}, {"idle_s", r.stages[s].idle_s},
                   {"bytes_per_step", per_axis_json(r.stages[s].bytes)}});
  return out;
}

// The advisor's memory model for this configuration, per rank (the stage
// that needs the most), without a machine's reserve: what the measured peak
// (peak_memory_bytes, or on a GPU device.array_bytes_peak_per_rank) is held
// against. The model knows training dtypes, not fp64: null there.
nlohmann::json predicted_memory_json(const RunOptions& o, const std::string& dtype, int ranks, const RunResult& r) {
  if (dtype != "fp32" && dtype != "bf16") return nullptr;
  // The attention that ran: a GPU keeps the unfused kernels (and their S×S
  // probabilities) above its flash kernels' head size.
  ModelSpec model = o.model;
  model.attention = r.attention == "flash" ? Attention::Flash : Attention::Unfused;
  Job job{model, ranks, o.batch, parse_dtype(dtype)};
  job.grad_dtype = parse_dtype(o.grad_dtype);
  job.stage_layers = o.stage_layers;
  const Config& c = o.config;
  const OptimizerState os{c.offload, c.shard_optimizer && c.grid.d > 1};
  return memory_json(memory_use(job, MachineProfile{}, c.grid, c.micro_batch, c.recompute, c.overlap, os,
                                c.sequence_parallel, nullptr, c.virtual_stages));
}

// Where the engine's arrays differ from what memory_predicted_bytes counts;
// null where they do not.
nlohmann::json memory_note(const RunOptions& o, const std::string& dtype) {
  if (dtype != "bf16" || o.grad_dtype != "bf16") return nullptr;
  return "bf16 gradients: the model counts 2 bytes a value of the accumulators; the engine keeps them in fp32 storage "
         "holding bf16 values (4 bytes) beside a 2-byte buffer for their reductions";
}

// The host link of the offloaded optimizer, per step after the first, mean
// over ranks (MODEL.md §9: copy_bytes_each_way is advisor predict's).
nlohmann::json offload_json(const RunOptions& o, const RunResult& r) {
  if (!o.config.offload) return {{"enabled", false}};
  const OffloadStats& s = r.offload;
  return {{"enabled", true},
          {"bucket_elements", o.buckets.offload_elements},
          {"chunk_buckets", o.buckets.offload_chunk},
          {"chunks", r.dp_buckets},
          {"buckets_per_step", s.buckets},
          {"copy_bytes_each_way", s.copy_bytes},
          {"copy_s_per_step", s.copy_s},
          {"hidden_s_per_step", s.hidden_s},
          {"clipping", o.opt.clip > 0}};
}

}  // namespace

nlohmann::json run_record(const RunOptions& o, const std::string& dtype, int ranks, const RunResult& r,
                          const Provenance& p) {
  nlohmann::json config = to_json(o.config);
  config["dtype"] = dtype;
  config["grad_dtype"] = o.grad_dtype;
  nlohmann::json steps = nlohmann::json::array();
  double gemm_s = 0, gemm_flops = 0, time_s = 0;
  for (const StepRecord& s : r.steps) {
    steps.push_back({{"step", s.step},
                     {"loss", s.loss},
                     {"grad_norm", s.grad_norm},
                     {"time_s", s.time_s},
                     {"compute_s", s.compute_s},
                     {"comm_s", per_axis_json(s.comm_s)},
                     {"sync_s", s.sync_s},
                     {"gemm_s", s.gemm_s},
                     {"gemm_flops", s.gemm_flops},
                     {"device_s", s.device_s},
                     {"late_s", s.late_s}});
    gemm_s += s.gemm_s, gemm_flops += s.gemm_flops, time_s += s.time_s;
  }
  const double tokens = double(o.batch) * o.model.seq_len * double(r.steps.size());
  return {{"device", device_json(o, r)},
          {"config", config},
          {"model", o.model.name},
          {"model_spec", to_json(o.model)},
          {"ranks", ranks},
          {"batch_sequences", o.batch},
          {"micro_steps", r.micro_steps},
          {"stages", stages_json(r)},
          {"data_parallel", {{"odp", o.config.overlap.odp}, {"shard_optimizer", o.config.shard_optimizer},
                             {"bucket_bytes", o.buckets.dp_bytes}, {"buckets", r.dp_buckets}}},
          {"offload", offload_json(o, r)},
          {"data", o.data},
          {"optimizer", {{"name", "adamw"}, {"lr", o.opt.lr}, {"beta1", o.opt.beta1}, {"beta2", o.opt.beta2},
                         {"eps", o.opt.eps}, {"weight_decay", o.opt.weight_decay}, {"clip", o.opt.clip}}},
          {"steps", steps},
          {"bytes_per_step", per_axis_json(r.bytes_per_step)},
          {"peak_memory_bytes", r.peak_memory_bytes},
          {"attention", r.attention},
          {"kernels", kernels_json(r)},
          {"memory_predicted_bytes", predicted_memory_json(o, dtype, ranks, r)},
          {"memory_note", memory_note(o, dtype)},
          {"final_loss", r.steps.empty() ? 0.0 : r.steps.back().loss},
          {"tokens_per_s", time_s > 0 ? tokens / time_s : 0.0},
          {"gemm", {{"seconds_per_rank", gemm_s}, {"flops_per_rank", gemm_flops},
                    {"flops_per_s", gemm_s > 0 ? gemm_flops / gemm_s : 0.0}}},
          // Hidden: time a non-blocking collective was in flight while this rank
          // computed (an upper bound: it includes waiting for peers to post).
          {"nonblocking", {{"inflight_s_per_step", r.inflight_s}, {"exposed_s_per_step", r.nonblocking_exposed_s},
                           {"hidden_s_per_step", r.inflight_s - r.nonblocking_exposed_s}}},
          {"provenance", {{"host", p.host}, {"mpi", p.mpi}, {"blas", p.blas}, {"git", p.git}, {"command", p.command}}}};
}

nlohmann::json comm_trace_json(const std::vector<std::vector<CommEvent>>& ranks) {
  static const char* const kKinds[] = {"blocking", "nonblocking", "message"};
  nlohmann::json out = {
      {"format", "fourfold-comm-trace/1"},
      {"clock", "seconds on each rank's steady clock: comparable between ranks of one host only"},
      {"fields", {"step", "axis", "kind", "bytes", "ready_s", "start_s", "end_s"}},
      {"kinds",
       {{"blocking", "a collective the schedule waits for at once: ready_s before the device's kernels are waited for, "
                     "start_s when issued, end_s when it returned"},
        {"nonblocking", "a collective an overlap flag issues: posted at start_s, seen complete at end_s"},
        {"message", "a stage's send or receive: posted at start_s, seen complete at end_s (bytes 0 on the receiver)"}}},
      {"ranks", nlohmann::json::array()}};
  for (const std::vector<CommEvent>& events : ranks) {
    nlohmann::json rows = nlohmann::json::array();
    for (const CommEvent& e : events)
      rows.push_back({e.step, axis_name(e.axis), kKinds[e.kind], e.bytes, e.ready_s, e.start_s, e.end_s});
    out["ranks"].push_back(std::move(rows));
  }
  return out;
}

}  // namespace ff::engine
