#include "advisor/core/engine_args.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include <CLI/CLI.hpp>

#include "advisor/core/error.hpp"

namespace ff {

const std::vector<std::string>& engine_devices() {
  static const std::vector<std::string> devices{"cpu", "paced", "cuda"};
  return devices;
}

bool engine_device_computes(const std::string& device, const std::string& dtype) {
  return (device == "cpu" || device == "paced" || device == "cuda") &&
         (dtype == "fp32" || dtype == "fp64" || dtype == "bf16");
}

EngineArgs engine_args(const std::string& model_arg, const Config& c, long batch, std::string* note,
                       const std::string& device, Dtype grad) {
  EngineArgs a;
  a.device = device;
  a.model = model_arg;
  static_cast<ConfigFlags&>(a) = config_flags(c);
  a.dtype = dtype_name(c.dtype);
  a.batch = batch;
  if (note) note->clear();
  if (!engine_device_computes(a.device, a.dtype)) {
    if (note)
      *note = a.device == "cuda" ? "the engine's cuda device has no " + a.dtype + " kernels yet: this line runs the "
                                   "same grid, placement and collectives on the GPUs, in fp32"
                                 : "the engine has no " + a.dtype + " device yet: this line runs the same grid, "
                                   "placement and collectives on its cpu device, in fp32";
    if (note && grad != Dtype::FP32) *note += ", gradients too";
    a.dtype = "fp32";
  }
  // fp32, the default, is left unsaid, so lines without the option read as before.
  if (grad != Dtype::FP32 && a.dtype == dtype_name(grad)) a.grad_dtype = a.dtype;
  return a;
}

std::string engine_grad_dtype(const EngineArgs& a) {
  if (!a.grad_dtype.empty()) return a.grad_dtype;
  return a.dtype == "fp64" ? "fp64" : "fp32";
}

Config config_of(const EngineArgs& a) {
  Config c = config_of(static_cast<const ConfigFlags&>(a));
  // fp64 (exactness checks) is no dtype of a job: its configuration is fp32's.
  c.dtype = a.dtype == "bf16" ? Dtype::BF16 : Dtype::FP32;
  if (std::find(engine_devices().begin(), engine_devices().end(), a.device) == engine_devices().end())
    input_error("--device " + a.device + ": expected cpu, paced or cuda");
  if (!engine_device_computes(a.device, a.dtype))
    input_error("--dtype " + a.dtype + ": the " + a.device + " device computes in fp32, bf16 or fp64" +
                (a.dtype == "fp16" ? " (fp16, with its loss scaling, is to come)" : ""));
  if (a.device == "paced") check_pace(static_cast<const PaceFlags&>(a));
  // fp64 (the exactness runs) keeps fp64 gradients: fp32 there would be a
  // third precision the engine has no path for. fp16 gradients need fp16
  // training with loss scaling, which stays out of the engine.
  if (!a.grad_dtype.empty() && a.grad_dtype != a.dtype && (a.grad_dtype != "fp32" || a.dtype == "fp64"))
    input_error("--grad-dtype " + a.grad_dtype + ": expected " +
                (a.dtype == "fp64" ? std::string("fp64 (the training dtype; fp64 runs keep fp64 gradients)")
                                   : "fp32 or the training dtype (--dtype " + a.dtype + ")"));
  if (c.overlap.otp)
    input_error("--overlap otp: the engine does not pipeline its collectives with its GEMMs (Transformer Engine's "
                "userbuffers; the advisor prices it)");
  // NCCL has no tags, and its stage lanes are kept apart by direction and the
  // sender's parity: the wrap from the last stage to the first would share a
  // lane with backward messages.
  if (c.virtual_stages > 1 && a.device == "cuda")
    input_error("--virtual-stages " + std::to_string(c.virtual_stages) +
                " with --device cuda: the interleaved schedule runs on the cpu and paced devices (its stage messages "
                "over NCCL would need a lane for the wrap from the last stage to the first)");
  if (a.offload && a.shard_optimizer)
    input_error("--offload with --shard-optimizer: the pair (reduce-scatter, optimizer on the host, all-gather) "
                "is not implemented, as the advisor does not price it; drop one");
  at_least("--offload-bucket", a.offload_bucket, 1, "elements");
  at_least("--offload-chunk", a.offload_chunk, 1, "buckets");
  if (!(a.clip >= 0) || !std::isfinite(a.clip)) input_error("--clip: expected a norm >= 0 (0: no clipping)");
  if (!(a.dp_bucket_mib > 0) || !std::isfinite(a.dp_bucket_mib)) input_error("--dp-bucket-mib: expected a size in MiB > 0");
  at_least("--batch", a.batch, 0, "sequences (0: one micro-step)");
  at_least("--seq-len", a.seq_len, 0, "tokens (0: the model's)");
  at_least("--steps", a.steps, 1, "optimizer steps");
  if (!(a.lr > 0) || !std::isfinite(a.lr)) input_error("--lr: expected a learning rate > 0");
  return c;
}

std::vector<std::string> engine_argv(const EngineArgs& a) {
  const EngineArgs d;
  auto num = [](auto v) { return std::to_string(v); };
  std::vector<std::string> v{"--model", a.model, "--grid", a.grid, "--order", a.order, "--micro-batch",
                             num(a.micro_batch)};
  if (a.pipeline != d.pipeline) v.insert(v.begin() + 4, {"--pipeline", num(a.pipeline)});
  if (a.seq_len != d.seq_len) v.insert(v.begin() + 2, {"--seq-len", num(a.seq_len)});
  if (!a.stage_layers.empty()) {
    std::string list;
    for (int b : a.stage_layers) list += (list.empty() ? "" : ",") + num(b);
    v.insert(v.end(), {"--stage-layers", list});
  }
  // Full as the bare flag, which every engine version reads.
  const Recompute rc = recompute_flag(a.recompute);
  if (rc == Recompute::Full) v.push_back("--recompute");
  if (rc == Recompute::Selective) v.insert(v.end(), {"--recompute", "selective"});
  if (a.offload) v.push_back("--offload");
  if (a.shard_optimizer) v.push_back("--shard-optimizer");
  if (a.sequence_parallel) v.push_back("--sequence-parallel");
  if (a.virtual_stages != d.virtual_stages) v.insert(v.end(), {"--virtual-stages", num(a.virtual_stages)});
  auto real = [](double x) {  // the shortest decimal that reads back as x: 0.1, not 0.10000000000000001
    char buf[32];
    // At least the integer digits: 50, not 5e+01.
    const int whole = std::abs(x) >= 1 && std::isfinite(x) ? int(std::floor(std::log10(std::abs(x)))) + 1 : 1;
    for (int digits = std::min(whole, 17); digits <= 17; ++digits) {
      std::snprintf(buf, sizeof buf, "%.*g", digits, x);
      if (std::strtod(buf, nullptr) == x) break;
    }
    return std::string(buf);
  };
  v.insert(v.end(), {"--overlap", a.overlap, "--device", a.device});
  if (a.device == "paced")  // the pace is part of what ran: always spelled out, next to the device
    v.insert(v.end(), {"--pace-gflops", real(a.pace_gflops), "--pace-gbps", real(a.pace_gbps), "--poll-us",
                       real(a.poll_us), "--pace-host-gbps", real(a.pace_host_gbps)});
  v.insert(v.end(), {"--dtype", a.dtype});
  if (a.grad_dtype != d.grad_dtype) v.insert(v.end(), {"--grad-dtype", a.grad_dtype});
  if (a.dp_bucket_mib != d.dp_bucket_mib) v.insert(v.end(), {"--dp-bucket-mib", real(a.dp_bucket_mib)});
  if (a.offload_bucket != d.offload_bucket) v.insert(v.end(), {"--offload-bucket", num(a.offload_bucket)});
  if (a.offload_chunk != d.offload_chunk) v.insert(v.end(), {"--offload-chunk", num(a.offload_chunk)});
  if (a.clip != d.clip) v.insert(v.end(), {"--clip", real(a.clip)});
  if (a.batch != d.batch) v.insert(v.end(), {"--batch", num(a.batch)});
  if (a.steps != d.steps) v.insert(v.end(), {"--steps", num(a.steps)});
  if (a.data != d.data) v.insert(v.end(), {"--data", a.data});
  if (a.record != d.record) v.insert(v.end(), {"--record", a.record});
  if (a.trace_comm != d.trace_comm) v.insert(v.end(), {"--trace-comm", a.trace_comm});
  if (a.lr != d.lr) v.insert(v.end(), {"--lr", real(a.lr)});
  if (a.seed != d.seed) v.insert(v.end(), {"--seed", num(a.seed)});
  if (a.bench) v.push_back("--bench");
  if (a.profile_kernels) v.push_back("--profile-kernels");
  if (a.quiet) v.push_back("--quiet");
  return v;
}

std::string join_args(const std::vector<std::string>& argv) {
  std::string s;
  for (const std::string& a : argv) s += (s.empty() ? "" : " ") + a;
  return s;
}

void add_engine_options(CLI::App& app, EngineArgs& a) {
  app.add_option("--model", a.model, "Model: a preset name, a model JSON file or a Hugging Face config.json")
      ->capture_default_str();
  app.add_option("--seq-len", a.seq_len, "Tokens per sequence, in place of the model's (0: the model's)");
  app.add_option("--stage-layers", a.stage_layers,
                 "Each pipeline stage's blocks, first to last, pinned (default: the advisor's partition, MODEL.md §9)")
      ->delimiter(',');
  add_config_options(app, a);
  app.add_option("--offload-bucket", a.offload_bucket, "Offload: elements per optimizer bucket")->capture_default_str();
  app.add_option("--offload-chunk", a.offload_chunk,
                 "Offload: buckets per all-reduce chunk (without --clip, each chunk's optimizer waits for that chunk alone)")
      ->capture_default_str();
  app.add_option("--dp-bucket-mib", a.dp_bucket_mib, "Bucket size of the data-parallel gradient reduction under odp")
      ->capture_default_str();
  app.add_option("--device", a.device,
                 "Where the math runs: cpu (OpenBLAS and plain loops), paced (the cpu's results, each kernel "
                 "completing on a virtual device clock at the --pace-* rates; MPI waits poll every --poll-us), "
                 "or cuda (this rank's GPU: CUDA kernels and cuBLAS)")
      ->capture_default_str();
  add_pace_options(app, a);
  app.add_option("--dtype", a.dtype, "Scalar: fp32, bf16 (fp32 master weights), or fp64 (exactness checks)")
      ->capture_default_str();
  app.add_option("--grad-dtype", a.grad_dtype,
                 "Gradient accumulators and their per-step reductions: fp32 or the training dtype (default fp32; "
                 "fp64 in fp64)");
  app.add_option("--batch", a.batch, "Sequences per step (default: micro_batch·G_z·G_data, one micro-step)");
  app.add_option("--steps", a.steps, "Optimizer steps")->capture_default_str();
  app.add_option("--data", a.data, "A text file (byte-level tokens) or 'synthetic'")->capture_default_str();
  app.add_option("--record", a.record, "Write the run record (JSON) here, atomically, at the end");
  app.add_option("--trace-comm", a.trace_comm,
                 "Write every rank's collectives and messages (axis, bytes, start, end; JSON) here, atomically, "
                 "at the end");
  app.add_option("--lr", a.lr, "AdamW learning rate")->capture_default_str();
  app.add_option("--clip", a.clip, "Clip gradients to this global norm; 0: no clipping")->capture_default_str();
  app.add_option("--seed", a.seed, "Seed of parameters and data order")->capture_default_str();
  app.add_flag("--bench", a.bench, "Measure the BLAS peak in this run and report GEMM share and efficiency");
  app.add_flag("--profile-kernels", a.profile_kernels,
               "cuda: time every kernel between two events and record the time per kernel class (slows a "
               "launch-bound step; without it the device's busy and GEMM times are not measured)");
  app.add_flag("--quiet", a.quiet, "No per-step output");
}

}  // namespace ff
