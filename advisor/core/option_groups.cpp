#include "advisor/core/option_groups.hpp"

#include <cmath>

#include <CLI/CLI.hpp>

#include "advisor/core/error.hpp"

namespace ff {

namespace {

constexpr const char* kPaceFlags[] = {"--pace-gflops", "--pace-gbps", "--poll-us", "--pace-host-gbps"};

}  // namespace

long long at_least(const char* flag, long long value, long long min, const char* what) {
  if (value < min)
    input_error(std::string(flag) + " " + std::to_string(value) + ": expected " + what + " >= " + std::to_string(min));
  return value;
}

void add_config_options(CLI::App& app, ConfigFlags& f) {
  std::string sizes, with_p;
  for (Axis a : kGridFlagAxes) {
    const std::string g = std::string(sizes.empty() ? "" : ",") + "G_" + axis_name(a);
    sizes += g;
    with_p += (a == Axis::D ? ",P" : "") + g;
  }
  auto group = [](CLI::Option* o) { o->group(kConfigGroup); };
  group(app.add_option("--grid", f.grid,
                       sizes + " (stages from --pipeline) or " + with_p + ": the grid, whose product is the ranks"));
  group(app.add_option("--pipeline", f.pipeline, "Pipeline stages P (whole blocks each)")->capture_default_str());
  group(app.add_option("--order", f.order,
                       "Placement, innermost axis first (" + Order().str() + ": " + axis_name(kAxes[0]) +
                           " varies fastest; four letters place p just inside d)")
            ->capture_default_str());
  group(app.add_option("--micro-batch", f.micro_batch, "Sequences per rank per micro-step")->capture_default_str());
  CLI::Option* rc = app.add_option("--recompute", f.recompute,
                                   "What backward recomputes: none, selective (the attention core) or full (every "
                                   "block's forward); bare: full (MODEL.md §13)")
                        ->expected(0, 1);
  group(rc);
  group(app.add_flag("--no-recompute", f.no_recompute, "No recompute (the default)")->excludes(rc));
  group(app.add_flag("--offload", f.offload,
                     "Master weights and Adam state in host memory, streamed over the host link in buckets "
                     "(MODEL.md §9)"));
  group(app.add_flag("--shard-optimizer", f.shard_optimizer,
                     "Master weights and Adam state divided over the data axis (ZeRO-1, Megatron's distributed "
                     "optimizer): gradients reduce-scattered, weights all-gathered"));
  group(app.add_flag("--sequence-parallel", f.sequence_parallel,
                     "Megatron's sequence parallelism on Y: norms and residuals split over Y along the sequence, "
                     "Y's all-reduces a reduce-scatter and an all-gather (MODEL.md §13)"));
  group(app.add_option("--virtual-stages", f.virtual_stages,
                       "Model chunks per pipeline stage: Megatron's interleaved 1F1B (MODEL.md §9); 1: none")
            ->capture_default_str());
  group(app.add_option("--overlap", f.overlap, "Communication overlap: any of oar,ors,oag,odp,otp; none; all (= oar,ors,oag)")
            ->capture_default_str());
}

Recompute recompute_flag(const std::vector<std::string>& values) {
  if (values.empty()) return Recompute::None;
  if (values.front().empty()) return Recompute::Full;  // bare --recompute, as before selective existed
  return flag_value("--recompute", [&] { return parse_recompute(values.front()); });
}

Config config_of(const ConfigFlags& f) {
  Config c;
  c.grid = flag_value("--grid", [&] { return parse_grid(f.grid); });
  at_least("--pipeline", f.pipeline, 1, "a number of stages");
  if (c.grid.p == 1) {
    c.grid.p = f.pipeline;
  } else if (f.pipeline != 1 && f.pipeline != c.grid.p) {
    input_error("--grid " + f.grid + " says " + std::to_string(c.grid.p) + " pipeline stages and --pipeline " +
                std::to_string(f.pipeline) + " says otherwise: give one");
  }
  c.order = flag_value("--order", [&] { return parse_order(f.order); });
  c.micro_batch = int(at_least("--micro-batch", f.micro_batch, 1, "sequences per rank"));
  c.recompute = recompute_flag(f.recompute);
  c.offload = f.offload;
  c.shard_optimizer = f.shard_optimizer;
  c.sequence_parallel = f.sequence_parallel;
  c.virtual_stages = int(at_least("--virtual-stages", f.virtual_stages, 1, "model chunks per stage"));
  c.overlap = flag_value("--overlap", [&] { return parse_overlap(f.overlap); });
  return c;
}

ConfigFlags config_flags(const Config& c) {
  ConfigFlags f;
  f.grid = c.grid.str();
  f.pipeline = c.grid.p;
  f.order = c.order.str();
  f.micro_batch = c.micro_batch;
  if (c.recompute != Recompute::None) f.recompute = {recompute_name(c.recompute)};
  f.offload = c.offload;
  f.shard_optimizer = c.shard_optimizer;
  f.sequence_parallel = c.sequence_parallel;
  f.virtual_stages = c.virtual_stages;
  f.overlap = c.overlap.str();
  return f;
}

void add_pace_options(CLI::App& app, PaceFlags& f) {
  double* value[] = {&f.pace_gflops, &f.pace_gbps, &f.poll_us, &f.pace_host_gbps};
  const char* help[] = {
      "Paced device: GFLOP/s of every fp32 GEMM (fp64 half)",
      "Paced device: GB/s of element-wise kernels",
      ("Paced device: µs slept between MPI_Test calls while waiting; a profile that prices such a run must have "
       "been measured with the same (measure --poll-us, the profile's poll_us)"),
      "Paced device: GB/s of offload's copies each way, both ways at once",
  };
  for (int i = 0; i < 4; ++i) app.add_option(kPaceFlags[i], *value[i], help[i])->capture_default_str()->group(kPaceGroup);
}

DevicePace pace_of(const PaceFlags& f) {
  DevicePace p;
  p.gemm_flops = f.pace_gflops * 1e9;
  p.bytes_per_s = f.pace_gbps * 1e9;
  p.poll_s = f.poll_us * 1e-6;
  p.host_bytes_per_s = f.pace_host_gbps * 1e9;
  return p;
}

void check_pace(const PaceFlags& f) {
  const double value[] = {f.pace_gflops, f.pace_gbps, f.poll_us, f.pace_host_gbps};
  for (int i = 0; i < 4; ++i)
    if (!(value[i] > 0) || !std::isfinite(value[i])) input_error(std::string(kPaceFlags[i]) + ": expected a number > 0");
}

void set_pace(PaceFlags& f, const DevicePace& p) {
  f.pace_gflops = as_written(p.gemm_flops / 1e9);
  f.pace_gbps = as_written(p.bytes_per_s / 1e9);
  f.poll_us = as_written(p.poll_s * 1e6);
  f.pace_host_gbps = as_written(p.host_bytes_per_s / 1e9);
}

std::string pace_flag_given(const CLI::App& app) {
  for (const char* flag : kPaceFlags)
    if (app.count(flag) > 0) return flag;
  return "";
}

}  // namespace ff
