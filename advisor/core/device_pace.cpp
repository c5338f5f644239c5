#include "advisor/core/device_pace.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace ff {

double pace_gemm_flops(const DevicePace& p, bool fp64) { return fp64 ? p.gemm_flops / 2 : p.gemm_flops; }

std::string pace_label(const DevicePace& p) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "%g GFLOP/s, %g GB/s, poll %g us, host %g GB/s", p.gemm_flops / 1e9,
                p.bytes_per_s / 1e9, p.poll_s * 1e6, p.host_bytes_per_s / 1e9);
  return buf;
}

double as_written(double v) {
  if (v == 0 || !std::isfinite(v)) return v;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.12g", v);
  return std::strtod(buf, nullptr);
}

nlohmann::json paced_profile_json(nlohmann::json j, const DevicePace& p) {
  const double tflops = as_written(p.gemm_flops / 1e12);
  const std::string why = "the paced device (" + pace_label(p) + "), not this machine's: engine --device paced";
  j["compute"] = {{"kind", "paced"},
                  {"source", why},
                  {"peak_tflops", {{"bf16", tflops}, {"fp32", tflops}}},
                  {"attention_efficiency", 1.0}};
  j["gemm"] = {{"m", {1}}, {"n", {1}}, {"k", {1}}, {"bf16", {{{1.0}}}}, {"fp32", {{{1.0}}}}, {"source", why}};
  nlohmann::json& mem = j["memory"];
  mem["hbm_GBps"] = as_written(p.bytes_per_s / 1e9);
  mem["elementwise_efficiency"] = 1.0;
  mem.erase("elementwise_by_class");  // the pace moves every class's bytes at one rate
  nlohmann::json& ov = j["overlap"];
  ov["efficiency"] = 1.0;
  ov["compute_slowdown"] = 0.0;
  ov["source"] = "1, and no slowdown, on the paced device: it computes while its rank polls MPI (MODEL.md §11)";
  // The host link: each rank's copy engines, whatever its node's others do.
  nlohmann::json& host = j["host"];
  if (!host.contains("memory_GiB"))  // the arena lives in this host's RAM, as the ranks' memory does
    host["memory_GiB"] = mem.value("capacity_GiB", 0.0) * j.value("gpus_per_node", 1);
  host["kind"] = "paced";
  host["link_GBps"] = as_written(p.host_bytes_per_s / 1e9);
  host.erase("node_link_GBps");
  host["source"] = why;
  j["paced_device"] = {{"gemm_gflops", as_written(p.gemm_flops / 1e9)},
                       {"gbps", as_written(p.bytes_per_s / 1e9)},
                       {"poll_us", as_written(p.poll_s * 1e6)},
                       {"host_gbps", as_written(p.host_bytes_per_s / 1e9)}};
  return j;
}

}  // namespace ff
